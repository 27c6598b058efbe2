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

// -----

// Negative: two identical ops returned as two aliased outputs stay two values
// (each output overwrites its own argument buffer); a third copy that is not an
// output still merges.
// CHECK-LABEL: "func.func"
// CHECK: %[[A:[0-9]+]] = "ik.add"(%c0, %n)
// CHECK: %[[B:[0-9]+]] = "ik.add"(%c0, %n)
// CHECK-NOT: "ik.add"(%c0, %n)
// CHECK: "ik.mul"(%[[A]], %[[A]])
// CHECK: "func.return"(%{{[0-9]+}}, %[[A]], %[[B]])
"func.func"() ({
^bb0(%c0: tensor<1xi64>, %c1: tensor<1xi64>, %n: tensor<1xi64>):
  %0 = "ik.add"(%c0, %n) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.add"(%c0, %n) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %2 = "ik.add"(%c0, %n) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %3 = "ik.mul"(%0, %2) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  "func.return"(%3, %0, %1) : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> ()
}) {function_type = (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>), sym_name = "aliased_outputs", aliases = [[1, 0], [2, 1]]} : () -> ()
