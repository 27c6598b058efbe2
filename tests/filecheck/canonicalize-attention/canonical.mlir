// RUN: irkit opt %s -p canonicalize --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize --split-input-file --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// JAX einsum('bqhd,bkhd->bhqk') and einsum('bhqk,bkhd->bqhd') (V on the left): both become
// ik.matmul with explicit transposes, the probabilities on the left of P·V.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.contract"
// CHECK-DAG: %[[Q:.*]] = "ik.transpose"(%q) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[KT:.*]] = "ik.transpose"(%k) {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[S:.*]] = "ik.matmul"(%[[Q]], %[[KT]])
// CHECK: %[[P:.*]] = "ik.softmax"(%[[S]])
// CHECK: "ik.matmul"(%[[P]], %{{[0-9]+}})
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x4x8xf32>, %v: tensor<2x6x4x8xf32>):
  %0 = "ik.contract"(%q, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x6x6xf32>
  %1 = "ik.softmax"(%0) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.contract"(%v, %1) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 1>, rhs_batch = array<i64: 0, 1>, rhs_contract = array<i64: 3>} : (tensor<2x6x4x8xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.transpose"(%2) {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x8x6xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%3) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "einsum_scores"} : () -> ()

// -----

// A 3-D bmm over [B*H, S, D] between views: the views move out and cancel.
// CHECK-LABEL: "func.func"
// CHECK: %[[KT:.*]] = "ik.transpose"(%k)
// CHECK: %[[S:.*]] = "ik.matmul"(%q, %[[KT]]) : {{.*}} -> tensor<2x4x6x6xf32>
// CHECK-NOT: "ik.reshape"
// CHECK: "ik.softmax"(%[[S]])
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>):
  %0 = "ik.reshape"(%q) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %1 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 8, 8, 6>} : (tensor<2x4x8x6xf32>) -> tensor<8x8x6xf32>
  %3 = "ik.matmul"(%0, %2) : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %4 = "ik.reshape"(%3) {shape = array<i64: 2, 4, 6, 6>} : (tensor<8x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%5) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x6xf32>, sym_name = "bmm3d"} : () -> ()

// -----

// The dynamo exporter's key transpose on a [B*H, S, D] view is a transpose of the 4-D key.
// CHECK-LABEL: "func.func"
// CHECK: %[[T:.*]] = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>}
// CHECK-NOT: "ik.reshape"
// CHECK: "func.return"(%[[T]])
"func.func"() ({
^bb0(%k: tensor<2x4x6x8xf32>):
  %0 = "ik.reshape"(%k) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %1 = "ik.transpose"(%0) {perm = array<i64: 0, 2, 1>} : (tensor<8x6x8xf32>) -> tensor<8x8x6xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 4, 8, 6>} : (tensor<8x8x6xf32>) -> tensor<2x4x8x6xf32>
  "func.return"(%2) : (tensor<2x4x8x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>, sym_name = "transpose_flattened"} : () -> ()

// -----

// Q / 2, K * 0.5 before and Kᵀ * 0.5 after its transpose, scores / 2: one factor 1/16 on the scores.
// CHECK-LABEL: "func.func"
// CHECK: %[[KT:.*]] = "ik.transpose"(%k)
// CHECK: %[[S:.*]] = "ik.matmul"(%q, %[[KT]])
// CHECK: %[[C:.*]] = "ik.constant"() {value = dense<0.0625> : tensor<f32>}
// CHECK: %[[X:.*]] = "ik.mul"(%[[S]], %[[C]])
// CHECK: "ik.softmax"(%[[X]])
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>):
  %0 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.div"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %2 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%k, %2) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %4 = "ik.transpose"(%3) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %5 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.mul"(%4, %5) : (tensor<2x4x8x6xf32>, tensor<f32>) -> tensor<2x4x8x6xf32>
  %7 = "ik.matmul"(%1, %6) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.div"(%7, %8) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%10) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x6xf32>, sym_name = "scale_sites"} : () -> ()

// -----

// Negative: a division that does not feed a softmax is left alone.
// CHECK-LABEL: "func.func"
// CHECK: "ik.div"
"func.func"() ({
^bb0(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>):
  %0 = "ik.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = "ik.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.div"(%0, %1) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  "func.return"(%2) : (tensor<4x8xf32>) -> ()
}) {function_type = (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>, sym_name = "plain_div"} : () -> ()

// -----

// masked_fill(pad, -inf) is where(pad, -inf, s): the fill moves to the else side of a keep-mask.
// CHECK-LABEL: "func.func"
// CHECK: %[[K:.*]] = "ik.not"(%pad)
// CHECK: "ik.where"(%[[K]], %s, %{{[0-9]+}})
"func.func"() ({
^bb0(%s: tensor<2x4x6x6xf32>, %pad: tensor<6x6xi1>):
  %0 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.where"(%pad, %0, %s) : (tensor<6x6xi1>, tensor<f32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.softmax"(%1) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%2) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>, tensor<6x6xi1>) -> tensor<2x4x6x6xf32>, sym_name = "masked_fill"} : () -> ()

// -----

// (1 - cast(m)) * -10000 for an int64 0/1 mask is where(m != 0, 0, -10000).
// CHECK-LABEL: "func.func"
// CHECK: %[[M:.*]] = "ik.reshape"(%attention_mask)
// CHECK: %[[K:.*]] = "ik.ne"(%[[M]], 
// CHECK: %[[A:.*]] = "ik.where"(%[[K]], %{{[0-9]+}}, %{{[0-9]+}})
// CHECK: "ik.add"(%s, %[[A]])
// CHECK-NOT: "ik.sub"
"func.func"() ({
^bb0(%s: tensor<2x4x6x6xf32>, %attention_mask: tensor<2x6xi64>):
  %0 = "ik.reshape"(%attention_mask) {shape = array<i64: 2, 1, 1, 6>} : (tensor<2x6xi64>) -> tensor<2x1x1x6xi64>
  %1 = "ik.cast"(%0) {to = f32} : (tensor<2x1x1x6xi64>) -> tensor<2x1x1x6xf32>
  %2 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.sub"(%2, %1) : (tensor<f32>, tensor<2x1x1x6xf32>) -> tensor<2x1x1x6xf32>
  %4 = "ik.constant"() {value = dense<-10000.0> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.mul"(%3, %4) : (tensor<2x1x1x6xf32>, tensor<f32>) -> tensor<2x1x1x6xf32>
  %6 = "ik.add"(%s, %5) : (tensor<2x4x6x6xf32>, tensor<2x1x1x6xf32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%7) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>, tensor<2x6xi64>) -> tensor<2x4x6x6xf32>, sym_name = "one_minus_mask"} : () -> ()

// -----

// An additive where(causal, 0, -inf) becomes a where on the scores, and nested masks merge with and.
// CHECK-LABEL: "func.func"
// CHECK: %[[K:.*]] = "ik.and"(%pad, %causal)
// CHECK: %[[W:.*]] = "ik.where"(%[[K]], %s, %{{[0-9]+}})
// CHECK: "ik.softmax"(%[[W]])
// CHECK-NOT: "ik.add"
"func.func"() ({
^bb0(%s: tensor<2x4x6x6xf32>, %causal: tensor<6x6xi1>, %pad: tensor<2x1x1x6xi1>):
  %0 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.where"(%causal, %0, %1) : (tensor<6x6xi1>, tensor<f32>, tensor<f32>) -> tensor<6x6xf32>
  %3 = "ik.add"(%s, %2) : (tensor<2x4x6x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.where"(%pad, %3, %4) : (tensor<2x1x1x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%6) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>, tensor<6x6xi1>, tensor<2x1x1x6xi1>) -> tensor<2x4x6x6xf32>, sym_name = "additive_inf"} : () -> ()

// -----

// Negative: an additive -1e9 mask is not rewritten by canonicalize (a fully masked row would change);
// fuse-attention decides what it is.
// CHECK-LABEL: "func.func"
// CHECK: "ik.add"(%s,
"func.func"() ({
^bb0(%s: tensor<2x4x6x6xf32>, %keep: tensor<6x6xi1>):
  %0 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.constant"() {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.where"(%keep, %0, %1) : (tensor<6x6xi1>, tensor<f32>, tensor<f32>) -> tensor<6x6xf32>
  %3 = "ik.add"(%s, %2) : (tensor<2x4x6x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%4) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>, tensor<6x6xi1>) -> tensor<2x4x6x6xf32>, sym_name = "finite_additive"} : () -> ()

// -----

// exp(x - max) / sum(exp(x - max)) is a softmax.
// CHECK-LABEL: "func.func"
// CHECK: "ik.softmax"(%x) {axis = -1 : i64}
// CHECK-NOT: "ik.exp"
"func.func"() ({
^bb0(%x: tensor<2x4x6x6xf32>):
  %0 = "ik.reduce_max"(%x) {axes = array<i64: 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x6x6xf32>, tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.exp"(%1) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.reduce_sum"(%2) {axes = array<i64: 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x1xf32>
  %4 = "ik.div"(%2, %3) : (tensor<2x4x6x6xf32>, tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%4) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>, sym_name = "softmax_decomposed"} : () -> ()

// -----

// JAX's softmax: max(-inf, reduce_max), keepdims through reshapes, explicit broadcasts.
// CHECK-LABEL: "func.func"
// CHECK: "ik.softmax"(%x) {axis = -1 : i64}
// CHECK-NOT: "ik.exp"
"func.func"() ({
^bb0(%x: tensor<2x4x6x6xf32>):
  %0 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.reduce_max"(%x) {axes = array<i64: 3>} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6xf32>
  %2 = "ik.max"(%0, %1) : (tensor<f32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %3 = "ik.reshape"(%2) {shape = array<i64: 2, 4, 6, 1>} : (tensor<2x4x6xf32>) -> tensor<2x4x6x1xf32>
  %4 = "ik.broadcast"(%3) {shape = array<i64: 2, 4, 6, 6>} : (tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.sub"(%x, %4) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.exp"(%5) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.reduce_sum"(%6) {axes = array<i64: 3>} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6xf32>
  %8 = "ik.reshape"(%7) {shape = array<i64: 2, 4, 6, 1>} : (tensor<2x4x6xf32>) -> tensor<2x4x6x1xf32>
  %9 = "ik.broadcast"(%8) {shape = array<i64: 2, 4, 6, 6>} : (tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.div"(%6, %9) : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%10) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>, sym_name = "softmax_jax"} : () -> ()

// -----

// A float32 softmax of float16 scores, with e * reciprocal(sum): cast, softmax, cast.
// CHECK-LABEL: "func.func"
// CHECK: %[[X:.*]] = "ik.cast"(%x) {to = f32}
// CHECK: %[[P:.*]] = "ik.softmax"(%[[X]])
// CHECK: "ik.cast"(%[[P]]) {to = f16}
"func.func"() ({
^bb0(%x: tensor<2x4x6x6xf16>):
  %0 = "ik.cast"(%x) {to = f32} : (tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf32>
  %1 = "ik.reduce_max"(%0) {axes = array<i64: 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x1xf32>
  %2 = "ik.sub"(%0, %1) : (tensor<2x4x6x6xf32>, tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.exp"(%2) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.reduce_sum"(%3) {axes = array<i64: 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x1xf32>
  %5 = "ik.reciprocal"(%4) : (tensor<2x4x6x1xf32>) -> tensor<2x4x6x1xf32>
  %6 = "ik.mul"(%3, %5) : (tensor<2x4x6x6xf32>, tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.cast"(%6) {to = f16} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf16>
  "func.return"(%7) : (tensor<2x4x6x6xf16>) -> ()
}) {function_type = (tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf16>, sym_name = "softmax_upcast"} : () -> ()

// -----

// Negative: the sum runs over two axes: not a softmax.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.softmax"
// EXPLAIN: softmax-raise: 'ik.div' at unknown location not fused: the sum reduces axes [2, 3], not one axis
"func.func"() ({
^bb0(%x: tensor<2x4x6x6xf32>):
  %0 = "ik.reduce_max"(%x) {axes = array<i64: 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x6x6xf32>, tensor<2x4x6x1xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.exp"(%1) : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.reduce_sum"(%2) {axes = array<i64: 2, 3>, keepdims = true} : (tensor<2x4x6x6xf32>) -> tensor<2x4x1x1xf32>
  %4 = "ik.div"(%2, %3) : (tensor<2x4x6x6xf32>, tensor<2x4x1x1xf32>) -> tensor<2x4x6x6xf32>
  "func.return"(%4) : (tensor<2x4x6x6xf32>) -> ()
}) {function_type = (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>, sym_name = "softmax_bad_axis"} : () -> ()

// -----

// sum(x) / 16 with the axis re-inserted by a reshape is reduce_mean(keepdims); explicit broadcasts go.
// CHECK-LABEL: "func.func"
// CHECK: %[[M:.*]] = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true}
// CHECK: %[[D:.*]] = "ik.sub"(%x, %[[M]])
// CHECK: "ik.mul"(%[[D]], %w)
// CHECK-NOT: "ik.broadcast"
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>, %w: tensor<16xf32>):
  %0 = "ik.reduce_sum"(%x) {axes = array<i64: 2>} : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  %1 = "ik.reshape"(%0) {shape = array<i64: 2, 4, 1>} : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %2 = "ik.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.div"(%1, %2) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %4 = "ik.broadcast"(%3) {shape = array<i64: 2, 4, 16>} : (tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %5 = "ik.sub"(%x, %4) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %6 = "ik.reshape"(%w) {shape = array<i64: 1, 1, 16>} : (tensor<16xf32>) -> tensor<1x1x16xf32>
  %7 = "ik.mul"(%5, %6) : (tensor<2x4x16xf32>, tensor<1x1x16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%7) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>, sym_name = "mean_jax"} : () -> ()
