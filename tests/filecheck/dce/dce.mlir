// RUN: irkit opt %s -p dce --split-input-file | filecheck %s

// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.exp"
// CHECK-NOT: "ik.tanh"
// CHECK: "ik.neg"
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ik.tanh"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ik.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%2) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "dead_chain"} : () -> ()

// -----

// Negative: a value used only by the return stays.
// CHECK-LABEL: "func.func"
// CHECK: "ik.exp"
"func.func"() ({
^bb0(%x: tensor<4xf32>):
  %0 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "live"} : () -> ()
