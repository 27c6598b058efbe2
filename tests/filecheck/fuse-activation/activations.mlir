// RUN: irkit opt %s -p canonicalize,fuse-activation,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-activation,cse,dce --split-input-file --check-rewrites --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN
// RUN: irkit opt %s -p canonicalize,fuse-activation,cse,dce --split-input-file --check-rewrites --statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// 0.5 * x * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "none"}
// CHECK-NOT: "ik.erf"
// STATS: fuse-activation
// STATS: 1 fused-activations
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%0, %x) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.constant"() {value = dense<1.4142135> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.div"(%x, %3) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %5 = "ik.erf"(%4) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "ik.add"(%2, %5) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.mul"(%1, %6) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%7) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_erf_div"} : () -> ()

// -----

// x * 0.5 * (erf(x * 0.70710678) + 1).
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "none"}
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.erf"(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%x, %3) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %5 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%2, %5) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %7 = "ik.mul"(%4, %6) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%7) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_erf_mul"} : () -> ()

// -----

// x * (1 + erf(x * 0.70710678)) / 2.
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "none"}
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.erf"(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.add"(%2, %3) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %5 = "ik.mul"(%x, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.div"(%5, %6) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  "func.return"(%7) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_erf_halve"} : () -> ()

// -----

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))).
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "tanh"}
// CHECK-NOT: "ik.tanh"
// CHECK-NOT: "ik.pow"
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.pow"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.constant"() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%3, %1) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %5 = "ik.add"(%x, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "ik.mul"(%2, %5) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.tanh"(%6) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%8, %x) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %10 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %11 = "ik.add"(%10, %7) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %12 = "ik.mul"(%9, %11) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%12) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_tanh_pow"} : () -> ()

// -----

// The same with x * x * x.
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "tanh"}
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.mul"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = "ik.mul"(%0, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.constant"() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%3, %1) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %5 = "ik.add"(%x, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "ik.mul"(%2, %5) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.tanh"(%6) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%8, %x) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %10 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %11 = "ik.add"(%10, %7) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %12 = "ik.mul"(%9, %11) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%12) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_tanh_cube"} : () -> ()

// -----

// Constants folded and distributed: x * (0.5 * tanh(0.79788 x + 0.035677 x^3) + 0.5).
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "tanh"}
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.mul"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = "ik.mul"(%0, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%x, %2) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %4 = "ik.constant"() {value = dense<0.035677407> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.mul"(%1, %4) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %6 = "ik.add"(%3, %5) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.tanh"(%6) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %10 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %11 = "ik.add"(%9, %10) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %12 = "ik.mul"(%x, %11) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%12) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_tanh_folded"} : () -> ()

// -----

// float16 constants (0.044715 rounds to 0.04471): still GELU within float16's precision.
// CHECK-LABEL: "func.func"
// CHECK: "ik.gelu"(%x) {approximate = "tanh"} : (tensor<4x16xf16>)
"func.func"() ({
^bb0(%x: tensor<4x16xf16>):
  %0 = "ik.constant"() {value = dense<3.0> : tensor<f16>} : () -> tensor<f16>
  %1 = "ik.pow"(%x, %0) : (tensor<4x16xf16>, tensor<f16>) -> tensor<4x16xf16>
  %2 = "ik.constant"() {value = dense<0.798> : tensor<f16>} : () -> tensor<f16>
  %3 = "ik.constant"() {value = dense<0.0447> : tensor<f16>} : () -> tensor<f16>
  %4 = "ik.mul"(%3, %1) : (tensor<f16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %5 = "ik.add"(%x, %4) : (tensor<4x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %6 = "ik.mul"(%2, %5) : (tensor<f16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %7 = "ik.tanh"(%6) : (tensor<4x16xf16>) -> tensor<4x16xf16>
  %8 = "ik.constant"() {value = dense<0.5> : tensor<f16>} : () -> tensor<f16>
  %9 = "ik.mul"(%8, %x) : (tensor<f16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %10 = "ik.constant"() {value = dense<1.0> : tensor<f16>} : () -> tensor<f16>
  %11 = "ik.add"(%10, %7) : (tensor<f16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %12 = "ik.mul"(%9, %11) : (tensor<4x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  "func.return"(%12) : (tensor<4x16xf16>) -> ()
}) {function_type = (tensor<4x16xf16>) -> tensor<4x16xf16>, sym_name = "gelu_f16"} : () -> ()

// -----

// GELU of (x + b): the variable is the add, which stays.
// CHECK-LABEL: "func.func"
// CHECK: %[[H:.*]] = "ik.add"(%x, %b)
// CHECK: "ik.gelu"(%[[H]])
"func.func"() ({
^bb0(%x: tensor<4x16xf32>, %b: tensor<16xf32>):
  %0 = "ik.add"(%x, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.mul"(%1, %0) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.constant"() {value = dense<1.4142135> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.div"(%0, %4) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %6 = "ik.erf"(%5) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.add"(%3, %6) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = "ik.mul"(%2, %7) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%8) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_of_bias_add"} : () -> ()

// -----

// x * sigmoid(x).
// CHECK-LABEL: "func.func"
// CHECK: "ik.silu"(%x)
// CHECK-NOT: "ik.sigmoid"
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.sigmoid"(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = "ik.mul"(%x, %0) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%1) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "silu"} : () -> ()

// -----

// x / (1 + exp(-x)).
// CHECK-LABEL: "func.func"
// CHECK: "ik.silu"(%x)
// CHECK-NOT: "ik.exp"
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.neg"(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = "ik.exp"(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.add"(%0, %2) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %4 = "ik.div"(%x, %3) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%4) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "silu_exp"} : () -> ()

// -----

// Negative: 0.04 instead of 0.044715 is not GELU; the values say by how much.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.gelu"
// CHECK: "ik.tanh"
// EXPLAIN: fuse-activation: 'ik.tanh' at unknown location not fused: the expression uses tanh but is not gelu(tanh) (the closest): it differs by {{.*}} (relative) at x={{.*}}; check its constants
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.pow"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.constant"() {value = dense<0.04> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%3, %1) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %5 = "ik.add"(%x, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "ik.mul"(%2, %5) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %7 = "ik.tanh"(%6) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %8 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%8, %x) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %10 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %11 = "ik.add"(%10, %7) : (tensor<f32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %12 = "ik.mul"(%9, %11) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%12) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "gelu_wrong_constant"} : () -> ()

// -----

// Negative: x * sigmoid(1.702 x) approximates GELU but is not it (nor SiLU).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.gelu"
// CHECK-NOT: "ik.silu"
// EXPLAIN: fuse-activation: 'ik.sigmoid' at unknown location not fused: the expression uses sigmoid but is not
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<1.702> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.sigmoid"(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.mul"(%x, %2) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%3) : (tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> tensor<4x16xf32>, sym_name = "quick_gelu"} : () -> ()

// -----

// Negative: the erf is also returned, so the expression cannot disappear into one op.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.gelu"
// EXPLAIN: fuse-activation: 'ik.erf' at unknown location not fused: the gelu(erf) expression's 'ik.erf' has a user outside it ('func.return'
"func.func"() ({
^bb0(%x: tensor<4x16xf32>):
  %0 = "ik.constant"() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %2 = "ik.erf"(%1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%x, %3) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %5 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%2, %5) : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %7 = "ik.mul"(%4, %6) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  "func.return"(%7, %2) : (tensor<4x16xf32>, tensor<4x16xf32>) -> ()
}) {function_type = (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>), sym_name = "gelu_leak"} : () -> ()
