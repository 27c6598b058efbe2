// An alias naming an argument the function does not have.
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<1x4xf32>, %cache: tensor<8x4xf32>, %pos: tensor<2xi32>):
    %0 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
    %1 = "ik.mul"(%x, %0) : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
    %2 = "ik.dynamic_update_slice"(%cache, %1, %pos) : (tensor<8x4xf32>, tensor<1x4xf32>, tensor<2xi32>) -> tensor<8x4xf32>
    %3 = "ik.reduce_sum"(%2) {axes = array<i64: 0>} : (tensor<8x4xf32>) -> tensor<4xf32>
    "func.return"(%3, %2) : (tensor<4xf32>, tensor<8x4xf32>) -> ()
  }) {function_type = (tensor<1x4xf32>, tensor<8x4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<8x4xf32>), sym_name = "main", aliases = [[1, 3]]} : () -> () loc("step.py":3:1)
}) : () -> ()
