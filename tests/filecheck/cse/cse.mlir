// RUN: irkit opt %s -p cse --split-input-file | filecheck %s

// CHECK-LABEL: "func.func"
// CHECK: %[[E:[0-9]+]] = "ik.exp"(%x)
// CHECK-NOT: "ik.exp"
// CHECK: "ik.add"(%[[E]], %[[E]])
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ik.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%2) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "same"} : () -> ()

// -----

// Negative: different attributes are different computations.
// CHECK-LABEL: "func.func"
// CHECK: "ik.reduce_sum"(%x) {axes = array<i64: 0>
// CHECK: "ik.reduce_sum"(%x) {axes = array<i64: 1>
"func.func"() ({
^bb0(%x: tensor<4x4xf32>):
  %0 = "ik.reduce_sum"(%x) {axes = array<i64: 0>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %1 = "ik.reduce_sum"(%x) {axes = array<i64: 1>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %2 = "ik.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%2) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4x4xf32>) -> tensor<4xf32>, sym_name = "different_axes"} : () -> ()
