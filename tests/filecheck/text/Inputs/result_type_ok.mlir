"func.func"() ({
^bb0(%x: tensor<4xf32>):
    %0 = "ik.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = "ik.mul"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%1) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "f"} : () -> ()
