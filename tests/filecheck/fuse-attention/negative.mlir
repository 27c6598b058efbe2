// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file --check-rewrites --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// The key is permuted with [0, 2, 1, 3] (heads into the contraction), not transposed: not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: fuse-attention: 'ik.softmax' at unknown location not fused: the scores' second operand is transposed with perm [0, 2, 1, 3], which is not the key transpose (it contracts dim 1 of the key, not its head dim 3)
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%5) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "wrong_permute"} : () -> ()

// -----

// Softmax over the query axis: not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: softmax is over axis 2, not the key axis 3
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.softmax"(%3) {axis = 2 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%5) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "wrong_axis"} : () -> ()

// -----

// A factor on V is not the attention scale: it stays on V (the value operand), scale is 1.0.
// CHECK-LABEL: "func.func"
// CHECK: %[[V:.*]] = "ik.mul"(%v, 
// CHECK: "ik.attention"(%q, %k, %[[V]]) {scale = 1.0 : f64}
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.softmax"(%1) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %3 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%v, %3) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %5 = "ik.matmul"(%2, %4) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%5) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "scale_on_v"} : () -> ()

// -----

// A random constant added to the scores is a bias, not a mask (its values are not 0 / -1e4).
// CHECK-LABEL: "func.func"
// CHECK: %[[B:.*]] = "ik.constant"() {value = dense<[
// CHECK: "ik.attention"(%q, %k, %v, %[[B]]) {operandSegmentSizes = array<i64: 1, 1, 1, 0, 1>, scale = 0.5 : f64}
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.constant"() {value = dense<[[[[0.12573022, -0.13210486, 0.64042264, 0.104900114], [-0.5356694, 0.36159506, 1.304, 0.94708097], [-0.70373523, -1.2654215, -0.62327445, 0.04132598], [-2.3250308, -0.21879166, -1.245911, -0.7322674]]]]> : tensor<1x1x4x4xf32>} : () -> tensor<1x1x4x4xf32>
  %5 = "ik.add"(%3, %4) : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %7 = "ik.matmul"(%6, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%7) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "random_additive"} : () -> ()

// -----

// where(triu, scores, -1e9): a constant keep-mask that is not lower-triangular is not causal;
// it stays an explicit mask operand.
// CHECK-LABEL: "func.func"
// CHECK-NOT: causal
// CHECK: "ik.attention"(%q, %k, %v, %{{[0-9]+}}) {scale = 0.5 : f64} : ({{.*}}, tensor<4x4xi1>)
// EXPLAIN: fused: the keep-mask from 'ik.constant' at unknown location is a constant that is not causal (query 0 keeps key 1 (sizes static)); it is passed as an explicit mask, not as causal=true
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.constant"() {value = dense<[[true, true, true, true], [false, true, true, true], [false, false, true, true], [false, false, false, true]]> : tensor<4x4xi1>} : () -> tensor<4x4xi1>
  %5 = "ik.constant"() {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %3, %5) : (tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%8) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "anticausal_where"} : () -> ()

// -----

// where(tril, scores, -100): -100 is not a mask value (<= -1e4 or -inf), so no fusion.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: the where fills masked scores with -100, not a mask value (-inf or <= -1e4)
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.constant"() {value = dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>} : () -> tensor<4x4xi1>
  %5 = "ik.constant"() {value = dense<-100.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %3, %5) : (tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%8) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "small_fill"} : () -> ()

// -----

// masked_fill(~tril, -100): the fill is on the then side and -100 is not a mask value, so no
// fusion, and the explanation names the fill value rather than the scores.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: not fused: the where (a masked_fill) fills masked scores with -100, which is not a mask value: masks fill with -inf, the dtype's minimum or a large negative (<= -1e4)
// EXPLAIN-NOT: non-constant tensor
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.constant"() {value = dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>} : () -> tensor<4x4xi1>
  %5 = "ik.constant"() {value = dense<-100.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %5, %3) : (tensor<4x4xi1>, tensor<f32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%8) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "masked_fill_small"} : () -> ()

// -----

// The probabilities are also returned: fusing would lose them.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: the attention probabilities have 2 uses (func.return, ik.matmul), not one P·V matmul
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%5, %4) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>), sym_name = "probs_returned"} : () -> ()

// -----

// Scores multiplied by a per-key tensor: not a scale.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: the scores are multiplied by a non-scalar tensor (tensor<1x1x1x4xf32>)
"func.func"() ({
^bb0(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %2 = "ik.constant"() {value = dense<[[[[0.1, 0.2, 0.3, 0.4]]]]> : tensor<1x1x1x4xf32>} : () -> tensor<1x1x1x4xf32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x4x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x4x4x4xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  "func.return"(%5) : (tensor<1x4x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>, sym_name = "tensor_scale"} : () -> ()

// -----

// JAX einsum that contracts the sequence dims of Q and K ('bqhd,bkhd->bhdd' over q and k):
// a contraction, but not over the head dim, so not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: fuse-attention: 'ik.softmax' at unknown location not fused: the scores' first operand is transposed with perm [0, 2, 3, 1], which moves dim 1 into the contraction instead of the head dim
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x4x8xf32>, %v: tensor<2x6x4x8xf32>):
  %0 = "ik.contract"(%q, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 1>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 1>} : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x8x8xf32>
  %1 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.mul"(%0, %1) : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %3 = "ik.softmax"(%2) {axis = -1 : i64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %4 = "ik.contract"(%3, %v) {lhs_batch = array<i64: 0, 1>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x4x8x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x8x6xf32>
  "func.return"(%4) : (tensor<2x4x8x6xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x8x6xf32>, sym_name = "jax_contracts_sequence"} : () -> ()

// -----

// jax.nn.dot_product_attention's grouped spelling with the softmax over the query positions (axis 3),
// not the keys (axis 4): not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: fuse-attention: 'ik.softmax' at unknown location not fused: softmax is over axis 3, not the key axis 4
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x2x8xf32>, %v: tensor<2x6x2x8xf32>):
  %0 = "ik.reshape"(%q) {shape = array<i64: 2, 6, 2, 2, 8>} : (tensor<2x6x4x8xf32>) -> tensor<2x6x2x2x8xf32>
  %1 = "ik.contract"(%0, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 4>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x2x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x2x6x2x6xf32>
  %2 = "ik.transpose"(%1) {perm = array<i64: 3, 0, 1, 2, 4>} : (tensor<2x2x6x2x6xf32>) -> tensor<2x2x2x6x6xf32>
  %3 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x2x2x6x6xf32>, tensor<f32>) -> tensor<2x2x2x6x6xf32>
  %10 = "ik.softmax"(%4) {axis = 3 : i64} : (tensor<2x2x2x6x6xf32>) -> tensor<2x2x2x6x6xf32>
  %11 = "ik.contract"(%v, %10) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 1>, rhs_batch = array<i64: 1, 2>, rhs_contract = array<i64: 4>} : (tensor<2x6x2x8xf32>, tensor<2x2x2x6x6xf32>) -> tensor<2x2x8x2x6xf32>
  %12 = "ik.transpose"(%11) {perm = array<i64: 0, 4, 1, 3, 2>} : (tensor<2x2x8x2x6xf32>) -> tensor<2x6x2x2x8xf32>
  %13 = "ik.reshape"(%12) {shape = array<i64: 2, 6, 32>} : (tensor<2x6x2x2x8xf32>) -> tensor<2x6x32xf32>
  "func.return"(%13) : (tensor<2x6x32xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x6x32xf32>, sym_name = "jax_grouped_softmax_over_queries"} : () -> ()

// -----

// The grouped spelling whose P·V contraction sums over the query positions (dim 3), not the keys:
// not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: fuse-attention: 'ik.softmax' at unknown location not fused: the P·V contraction does not sum over the key axis (at 'ik.contract', unknown location)
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x2x8xf32>, %v: tensor<2x6x2x8xf32>):
  %0 = "ik.reshape"(%q) {shape = array<i64: 2, 6, 2, 2, 8>} : (tensor<2x6x4x8xf32>) -> tensor<2x6x2x2x8xf32>
  %1 = "ik.contract"(%0, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 4>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x2x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x2x6x2x6xf32>
  %2 = "ik.transpose"(%1) {perm = array<i64: 3, 0, 1, 2, 4>} : (tensor<2x2x6x2x6xf32>) -> tensor<2x2x2x6x6xf32>
  %3 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x2x2x6x6xf32>, tensor<f32>) -> tensor<2x2x2x6x6xf32>
  %10 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<2x2x2x6x6xf32>) -> tensor<2x2x2x6x6xf32>
  %11 = "ik.contract"(%v, %10) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 1>, rhs_batch = array<i64: 1, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x2x8xf32>, tensor<2x2x2x6x6xf32>) -> tensor<2x2x8x2x6xf32>
  %12 = "ik.transpose"(%11) {perm = array<i64: 0, 4, 1, 3, 2>} : (tensor<2x2x8x2x6xf32>) -> tensor<2x6x2x2x8xf32>
  %13 = "ik.reshape"(%12) {shape = array<i64: 2, 6, 32>} : (tensor<2x6x2x2x8xf32>) -> tensor<2x6x32xf32>
  "func.return"(%13) : (tensor<2x6x32xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x6x32xf32>, sym_name = "jax_grouped_pv_over_queries"} : () -> ()

// -----

// Heads flattened into a 3-D bmm, softmax over the query axis (1), not the key axis: not attention.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// CHECK: "ik.softmax"
// EXPLAIN: fuse-attention: 'ik.softmax' at unknown location not fused: softmax is over axis 1, not the key axis 2
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.reshape"(%q) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %1 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 8, 8, 6>} : (tensor<2x4x8x6xf32>) -> tensor<8x8x6xf32>
  %3 = "ik.matmul"(%0, %2) : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %4 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.mul"(%3, %4) : (tensor<8x6x6xf32>, tensor<f32>) -> tensor<8x6x6xf32>
  %6 = "ik.softmax"(%5) {axis = 1 : i64} : (tensor<8x6x6xf32>) -> tensor<8x6x6xf32>
  %7 = "ik.reshape"(%v) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %8 = "ik.matmul"(%6, %7) : (tensor<8x6x6xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>
  %9 = "ik.reshape"(%8) {shape = array<i64: 2, 4, 6, 8>} : (tensor<8x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%9) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "bmm3d_softmax_over_queries"} : () -> ()
