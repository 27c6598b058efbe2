"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<3xf16>):
    %0 = "ik.bitcast"(%x) {dtype = f32} : (tensor<3xf16>) -> tensor<f32> loc("pack.py":7:3)
    "func.return"(%0) : (tensor<f32>) -> ()
  }) {function_type = (tensor<3xf16>) -> tensor<f32>, sym_name = "main"} : () -> ()
}) : () -> ()
