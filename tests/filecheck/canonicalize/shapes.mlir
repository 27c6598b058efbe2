// RUN: irkit opt %s -p canonicalize --split-input-file | filecheck %s

// Two transposes compose; here into the identity, so both vanish.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.transpose"
"func.func"() ({
^bb0(%x: tensor<2x?x4xf32, ["S"]>):
  %0 = "ik.transpose"(%x) {perm = array<i64: 0, 2, 1>} : (tensor<2x?x4xf32, ["S"]>) -> tensor<2x4x?xf32, ["S"]>
  %1 = "ik.transpose"(%0) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x?xf32, ["S"]>) -> tensor<2x?x4xf32, ["S"]>
  "func.return"(%1) : (tensor<2x?x4xf32, ["S"]>) -> ()
}) {function_type = (tensor<2x?x4xf32, ["S"]>) -> tensor<2x?x4xf32, ["S"]>, sym_name = "transpose_pair"} : () -> ()

// -----

// A chain of three permutes becomes one.
// CHECK-LABEL: "func.func"
// CHECK: "ik.transpose"(%x) {perm = array<i64: 2, 0, 1>}
// CHECK-NOT: "ik.transpose"
"func.func"() ({
^bb0(%x: tensor<2x3x4xf32>):
  %0 = "ik.transpose"(%x) {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = "ik.transpose"(%0) {perm = array<i64: 0, 2, 1>} : (tensor<3x2x4xf32>) -> tensor<3x4x2xf32>
  %2 = "ik.transpose"(%1) {perm = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  "func.return"(%2) : (tensor<4x2x3xf32>) -> ()
}) {function_type = (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>, sym_name = "transpose_chain"} : () -> ()

// -----

// reshape(reshape(x)) -> reshape(x), with symbolic dims.
// CHECK-LABEL: "func.func"
// CHECK: "ik.reshape"(%x) {shape = ["B*S", 8 : i64]}
// CHECK-NOT: "ik.reshape"
"func.func"() ({
^bb0(%x: tensor<?x?x8xf32, ["B", "S"]>):
  %0 = "ik.reshape"(%x) {shape = ["B", "S", 2 : i64, 4 : i64]} : (tensor<?x?x8xf32, ["B", "S"]>) -> tensor<?x?x2x4xf32, ["B", "S"]>
  %1 = "ik.reshape"(%0) {shape = ["B*S", 8 : i64]} : (tensor<?x?x2x4xf32, ["B", "S"]>) -> tensor<?x8xf32, ["B*S"]>
  "func.return"(%1) : (tensor<?x8xf32, ["B*S"]>) -> ()
}) {function_type = (tensor<?x?x8xf32, ["B", "S"]>) -> tensor<?x8xf32, ["B*S"]>, sym_name = "reshape_chain"} : () -> ()

// -----

// Casting f16 -> f32 -> f64 is one cast; f32 -> f16 -> f32 rounds and stays.
// CHECK-LABEL: "func.func"
// CHECK: "ik.cast"(%a) {to = f64}
// CHECK: "ik.cast"(%b) {to = f16}
// CHECK: "ik.cast"(%{{[0-9]+}}) {to = f32}
"func.func"() ({
^bb0(%a: tensor<4xf16>, %b: tensor<4xf32>):
  %0 = "ik.cast"(%a) {to = f32} : (tensor<4xf16>) -> tensor<4xf32>
  %1 = "ik.cast"(%0) {to = f64} : (tensor<4xf32>) -> tensor<4xf64>
  %2 = "ik.cast"(%b) {to = f16} : (tensor<4xf32>) -> tensor<4xf16>
  %3 = "ik.cast"(%2) {to = f32} : (tensor<4xf16>) -> tensor<4xf32>
  "func.return"(%1, %3) : (tensor<4xf64>, tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf16>, tensor<4xf32>) -> (tensor<4xf64>, tensor<4xf32>), sym_name = "casts"} : () -> ()

// -----

// Small constant expressions fold.
// CHECK-LABEL: "func.func"
// CHECK: "ik.constant"() {value = dense<[2.0, 3.0]> : tensor<2xf32>}
// CHECK-NOT: "ik.add"
"func.func"() ({
^bb0():
  %0 = "ik.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.add"(%0, %1) : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  "func.return"(%2) : (tensor<2xf32>) -> ()
}) {function_type = () -> tensor<2xf32>, sym_name = "fold"} : () -> ()

// -----

// An operand that is empty along the concat axis adds nothing: with one operand left the concat is
// that operand (Phi-3's rotary head and its empty pass-through slice).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.concat"
// CHECK: "func.return"(%x)
"func.func"() ({
^bb0(%x: tensor<?x4x16xf32, ["B"]>, %e: tensor<?x4x0xf32, ["B"]>):
  %0 = "ik.concat"(%x, %e) {axis = 2 : i64} : (tensor<?x4x16xf32, ["B"]>, tensor<?x4x0xf32, ["B"]>) -> tensor<?x4x16xf32, ["B"]>
  "func.return"(%0) : (tensor<?x4x16xf32, ["B"]>) -> ()
}) {function_type = (tensor<?x4x16xf32, ["B"]>, tensor<?x4x0xf32, ["B"]>) -> tensor<?x4x16xf32, ["B"]>, sym_name = "concat_empty"} : () -> ()

// -----

// Two non-empty operands stay concatenated, without the empty one.
// CHECK-LABEL: "func.func"
// CHECK: "ik.concat"(%x, %y) {axis = -1 : i64}
"func.func"() ({
^bb0(%x: tensor<2x3xf32>, %e: tensor<2x0xf32>, %y: tensor<2x5xf32>):
  %0 = "ik.concat"(%x, %e, %y) {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x0xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  "func.return"(%0) : (tensor<2x8xf32>) -> ()
}) {function_type = (tensor<2x3xf32>, tensor<2x0xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>, sym_name = "concat_empty_middle"} : () -> ()

// -----

// Negative: a symbolic extent along the axis may be non-zero, and a concat of only empty operands
// stays (there is nothing non-empty to return).
// CHECK-LABEL: "func.func"
// CHECK: "ik.concat"(%x, %s)
// CHECK: "ik.concat"(%e, %e)
"func.func"() ({
^bb0(%x: tensor<2x3xf32>, %s: tensor<2x?xf32, ["N"]>, %e: tensor<2x0xf32>):
  %0 = "ik.concat"(%x, %s) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x?xf32, ["N"]>) -> tensor<2x?xf32, ["N+3"]>
  %1 = "ik.concat"(%e, %e) {axis = 1 : i64} : (tensor<2x0xf32>, tensor<2x0xf32>) -> tensor<2x0xf32>
  "func.return"(%0, %1) : (tensor<2x?xf32, ["N+3"]>, tensor<2x0xf32>) -> ()
}) {function_type = (tensor<2x3xf32>, tensor<2x?xf32, ["N"]>, tensor<2x0xf32>) -> (tensor<2x?xf32, ["N+3"]>, tensor<2x0xf32>), sym_name = "concat_keep"} : () -> ()
