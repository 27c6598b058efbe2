// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file --check-rewrites --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// Gemma 2's logit soft-capping: tanh(scores / 50) * 50 between the scaled QKᵀ and the additive mask.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v, %m) {scale = 0.35355338{{[0-9]*}} : f64, softcap = 50.0 : f64}
// CHECK-NOT: "ik.tanh"
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %4 = "ik.constant"() {value = dense<50.0> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.div"(%3, %4) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %6 = "ik.tanh"(%5) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %7 = "ik.mul"(%6, %4) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %8 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.where"(%m, %7, %8) : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %11 = "ik.matmul"(%10, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%11) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x2x4x8xf32>, sym_name = "gemma2_softcap"} : () -> ()

// -----

// c1 * tanh(c2 * s) with c1 = 30 and no scale: softcap = 30 and scale = c1 * c2 = 30 * 0.1 = 3.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 3.0{{[0-9]*}} : f64, softcap = 30.0 : f64}
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %4 = "ik.tanh"(%3) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %5 = "ik.constant"() {value = dense<30.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.mul"(%5, %4) : (tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%8) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>, sym_name = "cap_mul_form"} : () -> ()

// -----

// Negative: the tanh is applied to Q, not between QKᵀ and the softmax: plain attention, no soft-cap.
// CHECK-LABEL: "func.func"
// CHECK: "ik.tanh"(%q)
// CHECK: "ik.attention"
// CHECK-NOT: softcap
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>):
  %t = "ik.tanh"(%q) : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%t, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%5) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>, sym_name = "tanh_on_q"} : () -> ()

// -----

// Negative: the tanh is after the softmax (on the probabilities): not a soft-cap, not fused.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// CHECK: "ik.tanh"
// EXPLAIN: not fused: the attention probabilities feed 'ik.tanh' at unknown location, not a matmul with V
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.softmax"(%1) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %3 = "ik.tanh"(%2) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %4 = "ik.matmul"(%3, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%4) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>, sym_name = "tanh_after_softmax"} : () -> ()

// -----

// Negative: a bias added inside the tanh (tanh((s + b) / 50) * 50): ik.attention adds its bias after capping.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.tanh"
// EXPLAIN: not fused: a tensor is added to the scores inside the tanh soft-cap at 'ik.add' at unknown location (ik.attention adds its bias after capping)
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %b: tensor<1x2x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.add"(%1, %b) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %3 = "ik.constant"() {value = dense<50.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.div"(%2, %3) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %5 = "ik.tanh"(%4) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %6 = "ik.mul"(%5, %3) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%8) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>, sym_name = "bias_inside_cap"} : () -> ()

// -----

// Negative: the tanh is scaled by -50 on its way to the softmax: not a positive soft-cap.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: the tanh over the scores is scaled by -50 on its way to the softmax, not by a positive soft-cap (softcap * tanh(s / softcap))
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.tanh"(%1) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %3 = "ik.constant"() {value = dense<-50.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %5 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %6 = "ik.matmul"(%5, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%6) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>, sym_name = "negative_cap"} : () -> ()

// -----

// JAX (Flax Gemma 2): einsum scores as ik.contract (dot_general), soft-capped, then the P·V contraction.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.contract"
// CHECK: "ik.attention"({{.*}}) {scale = 0.35355338{{[0-9]*}} : f64, softcap = 50.0 : f64}
// CHECK-NOT: "ik.tanh"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x4x8xf32>, %v: tensor<2x6x4x8xf32>):
  %0 = "ik.contract"(%q, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x6x6xf32>
  %1 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.mul"(%0, %1) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.constant"() {value = dense<50.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.div"(%2, %3) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.tanh"(%4) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.mul"(%5, %3) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.contract"(%7, %v) {lhs_batch = array<i64: 0, 1>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 1>} : (tensor<2x4x6x6xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %9 = "ik.transpose"(%8) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x6x8xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%9) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "jax_contract_softcap"} : () -> ()
