// RUN: irkit opt %s -p canonicalize --split-input-file | filecheck %s

// x * 1 + 0 -> x
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.add"
// CHECK: "func.return"(%x)
"func.func"() ({
^bb0(%x: tensor<4x8xf32>):
  %0 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%0, %x) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.add"(%1, %2) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  "func.return"(%3) : (tensor<4x8xf32>) -> ()
}) {function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, sym_name = "mul_one_add_zero"} : () -> ()

// -----

// Negative: adding zeros that broadcast x to a larger shape changes the type: kept.
// CHECK-LABEL: "func.func"
// CHECK: "ik.add"
"func.func"() ({
^bb0(%x: tensor<8xf32>):
  %0 = "ik.constant"() {value = dense<0.0> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %1 = "ik.add"(%x, %0) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  "func.return"(%1) : (tensor<4x8xf32>) -> ()
}) {function_type = (tensor<8xf32>) -> tensor<4x8xf32>, sym_name = "broadcasting_zero"} : () -> ()

// -----

// Negative: x * 2 is not x * 1.
// CHECK-LABEL: "func.func"
// CHECK: "ik.mul"(%x, %{{[0-9]+}})
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  "func.return"(%1) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "mul_two"} : () -> ()

// -----

// 1 / sqrt(x) -> rsqrt(x); pow(x, 2) -> x * x
// CHECK-LABEL: "func.func"
// CHECK-DAG: "ik.rsqrt"(%x)
// CHECK-DAG: "ik.mul"(%x, %x)
// CHECK-NOT: "ik.pow"
// CHECK-NOT: "ik.sqrt"
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ik.div"(%0, %1) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.pow"(%x, %3) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %5 = "ik.add"(%2, %4) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%5) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "rsqrt_square"} : () -> ()

// -----

// Eval-mode dropout disappears.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.dropout"
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.dropout"(%x) {p = 0.1 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "dropout"} : () -> ()
