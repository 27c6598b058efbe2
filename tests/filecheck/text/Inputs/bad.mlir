"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<4xf32>):
    %0 = "ik.exp"(%nope) : (tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()
  }) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
