// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file --check-rewrites --statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// BHSD: softmax(QKᵀ * 1/sqrt(8)) V, the textbook form.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.softmax"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.matmul"
// STATS: fuse-attention
// STATS: 1 fused-attentions
// STATS: 1 rewrites-checked
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "bhsd"} : () -> ()

// -----

// BSHD with permutes (GPT-2's old key.permute(0, 2, 3, 1)): the fused op reads Q and V through
// their transposes, K through the composed BHSD transpose; the output transpose stays.
// CHECK-LABEL: "func.func"
// CHECK-DAG: %[[Q:.*]] = "ik.transpose"(%q) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[K:.*]] = "ik.transpose"(%k) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[V:.*]] = "ik.transpose"(%v) {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[O:.*]] = "ik.attention"(%[[Q]], %[[K]], %[[V]])
// CHECK: "ik.transpose"(%[[O]]) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x4x8xf32>, %v: tensor<2x6x4x8xf32>):
  %0 = "ik.transpose"(%q) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %1 = "ik.transpose"(%k) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x8x6xf32>
  %2 = "ik.transpose"(%v) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %3 = "ik.matmul"(%0, %1) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.mul"(%3, %4) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.matmul"(%6, %2) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x6x8xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%8) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "bshd"} : () -> ()

// -----

// torch's matmul decomposition: 3-D bmm over [B*H, S, D] with views around it.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.matmul"
// CHECK-NOT: "ik.reshape"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.reshape"(%q) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %2 = "ik.reshape"(%0) {shape = array<i64: 8, 8, 6>} : (tensor<2x4x8x6xf32>) -> tensor<8x8x6xf32>
  %3 = "ik.matmul"(%1, %2) : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %4 = "ik.reshape"(%3) {shape = array<i64: 2, 4, 6, 6>} : (tensor<8x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.mul"(%4, %5) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.reshape"(%7) {shape = array<i64: 8, 6, 6>} : (tensor<2x4x6x6xf32>) -> tensor<8x6x6xf32>
  %9 = "ik.reshape"(%v) {shape = array<i64: 8, 6, 8>} : (tensor<2x4x6x8xf32>) -> tensor<8x6x8xf32>
  %10 = "ik.matmul"(%8, %9) : (tensor<8x6x6xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>
  %11 = "ik.reshape"(%10) {shape = array<i64: 2, 4, 6, 8>} : (tensor<8x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%11) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "bmm3d"} : () -> ()

// -----

// Heads flattened from the start: [B*H, S, D] operands run as [1, B*H, S, D].
// CHECK-LABEL: "func.func"
// CHECK: %[[Q:.*]] = "ik.reshape"(%q) {shape = array<i64: 1, 8, 6, 8>}
// CHECK: %[[A:.*]] = "ik.attention"(%[[Q]], 
// CHECK: "ik.reshape"(%[[A]]) {shape = array<i64: 8, 6, 8>}
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<8x6x8xf32>, %k: tensor<8x6x8xf32>, %v: tensor<8x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 2, 1>} : (tensor<8x6x8xf32>) -> tensor<8x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<8x6x6xf32>, tensor<f32>) -> tensor<8x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<8x6x6xf32>) -> tensor<8x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<8x6x6xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>
  "func.return"(%5) : (tensor<8x6x8xf32>) -> ()
}) {function_type = (tensor<8x6x8xf32>, tensor<8x6x8xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>, sym_name = "native3d"} : () -> ()

// -----

// JAX: einsum('bqhd,bkhd->bhqk') and einsum('bhqk,bkhd->bqhd') as ik.contract (dot_general).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.contract"
// CHECK: %[[O:.*]] = "ik.attention"
// CHECK: "ik.transpose"(%[[O]]) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x4x8xf32>, %v: tensor<2x6x4x8xf32>):
  %0 = "ik.contract"(%q, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x6x6xf32>
  %1 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.mul"(%0, %1) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.softmax"(%2) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.contract"(%3, %v) {lhs_batch = array<i64: 0, 1>, lhs_contract = array<i64: 3>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 1>} : (tensor<2x4x6x6xf32>, tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %5 = "ik.transpose"(%4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x6x8xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%5) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "jax_einsum"} : () -> ()

// -----

// Symbolic batch and sequence; causal mask from an iota compare.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true, scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.iota"
"func.func"() ({
^bb0(%q: tensor<?x4x?x8xf32, ["B", "S"]>, %k: tensor<?x4x?x8xf32, ["B", "S"]>, %v: tensor<?x4x?x8xf32, ["B", "S"]>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x8x?xf32, ["B", "S"]>
  %1 = "ik.matmul"(%q, %0) : (tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x8x?xf32, ["B", "S"]>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<f32>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %4 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = ["S", "S"]} : () -> tensor<?x?xi64, ["S", "S"]>
  %5 = "ik.iota"() {axis = 1 : i64, dtype = i64, shape = ["S", "S"]} : () -> tensor<?x?xi64, ["S", "S"]>
  %6 = "ik.le"(%5, %4) : (tensor<?x?xi64, ["S", "S"]>, tensor<?x?xi64, ["S", "S"]>) -> tensor<?x?xi1, ["S", "S"]>
  %7 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %8 = "ik.where"(%6, %3, %7) : (tensor<?x?xi1, ["S", "S"]>, tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<f32>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %9 = "ik.softmax"(%8) {axis = -1 : i64} : (tensor<?x4x?x?xf32, ["B", "S", "S"]>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %10 = "ik.matmul"(%9, %v) : (tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x?x8xf32, ["B", "S"]>
  "func.return"(%10) : (tensor<?x4x?x8xf32, ["B", "S"]>) -> ()
}) {function_type = (tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x?x8xf32, ["B", "S"]>, sym_name = "symbolic"} : () -> ()

// -----

// A float16 model computing the softmax in float32 (cast up, softmax, cast down).
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true, scale = 0.353{{[0-9]*}} : f64} : (tensor<2x4x6x8xf16>
// CHECK-NOT: "ik.cast"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf16>, %k: tensor<2x4x6x8xf16>, %v: tensor<2x4x6x8xf16>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf16>) -> tensor<2x4x8x6xf16>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf16>, tensor<2x4x8x6xf16>) -> tensor<2x4x6x6xf16>
  %2 = "ik.constant"() {value = dense<0.3535> : tensor<f16>} : () -> tensor<f16>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf16>, tensor<f16>) -> tensor<2x4x6x6xf16>
  %4 = "ik.cast"(%3) {to = f32} : (tensor<2x4x6x6xf16>) -> tensor<2x4x6x6xf32>
  %5 = "ik.constant"() {value = dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>} : () -> tensor<6x6xi1>
  %6 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.where"(%5, %4, %6) : (tensor<6x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.softmax"(%7) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %9 = "ik.cast"(%8) {to = f16} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf16>
  %10 = "ik.matmul"(%9, %v) : (tensor<2x4x6x6xf16>, tensor<2x4x6x8xf16>) -> tensor<2x4x6x8xf16>
  "func.return"(%10) : (tensor<2x4x6x8xf16>) -> ()
}) {function_type = (tensor<2x4x6x8xf16>, tensor<2x4x6x8xf16>, tensor<2x4x6x8xf16>) -> tensor<2x4x6x8xf16>, sym_name = "upcast_f16"} : () -> ()

// -----

// jax.nn.dot_product_attention: grouped query heads [B, T, K, G, H] contracted with ik.contract,
// scores permuted to [G, B, K, T, S]: one GQA attention (4 query heads, 2 key/value heads), causal.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.contract"
// CHECK: %[[O:.*]] = "ik.attention"({{.*}}) {causal = true, scale = 0.3535533{{[0-9]*}} : f64} : (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x2x8xf32>, %v: tensor<2x6x2x8xf32>):
  %0 = "ik.reshape"(%q) {shape = array<i64: 2, 6, 2, 2, 8>} : (tensor<2x6x4x8xf32>) -> tensor<2x6x2x2x8xf32>
  %1 = "ik.contract"(%0, %k) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 4>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x2x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x2x6x2x6xf32>
  %2 = "ik.transpose"(%1) {perm = array<i64: 3, 0, 1, 2, 4>} : (tensor<2x2x6x2x6xf32>) -> tensor<2x2x2x6x6xf32>
  %3 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x2x2x6x6xf32>, tensor<f32>) -> tensor<2x2x2x6x6xf32>
  %5 = "ik.iota"() {axis = 0 : i64, dtype = i32, shape = array<i64: 6, 6>} : () -> tensor<6x6xi32>
  %6 = "ik.iota"() {axis = 1 : i64, dtype = i32, shape = array<i64: 6, 6>} : () -> tensor<6x6xi32>
  %7 = "ik.ge"(%5, %6) : (tensor<6x6xi32>, tensor<6x6xi32>) -> tensor<6x6xi1>
  %8 = "ik.constant"() {value = dense<-2.3819763e+38> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.where"(%7, %4, %8) : (tensor<6x6xi1>, tensor<2x2x2x6x6xf32>, tensor<f32>) -> tensor<2x2x2x6x6xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<2x2x2x6x6xf32>) -> tensor<2x2x2x6x6xf32>
  %11 = "ik.contract"(%v, %10) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 1>, rhs_batch = array<i64: 1, 2>, rhs_contract = array<i64: 4>} : (tensor<2x6x2x8xf32>, tensor<2x2x2x6x6xf32>) -> tensor<2x2x8x2x6xf32>
  %12 = "ik.transpose"(%11) {perm = array<i64: 0, 4, 1, 3, 2>} : (tensor<2x2x8x2x6xf32>) -> tensor<2x6x2x2x8xf32>
  %13 = "ik.reshape"(%12) {shape = array<i64: 2, 6, 32>} : (tensor<2x6x2x2x8xf32>) -> tensor<2x6x32xf32>
  "func.return"(%13) : (tensor<2x6x32xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x6x32xf32>, sym_name = "jax_dot_product_attention"} : () -> ()

// -----

// Regression: the grouped spelling with the scale split between Q (before its [B, T, K, G, D]
// reshape) and K, √scale each. Both factors must reach the scores through the 5-D contraction
// and the permute that keeps the keys last: scale 1/√8, nothing left on Q or K.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.mul"
// CHECK: "ik.attention"({{.*}}) {scale = 0.3535533{{[0-9]*}} : f64} : (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
// CHECK-NOT: "ik.contract"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x2x8xf32>, %v: tensor<2x6x2x8xf32>):
  %0 = "ik.constant"() {value = dense<0.59460354> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%q, %0) : (tensor<2x6x4x8xf32>, tensor<f32>) -> tensor<2x6x4x8xf32>
  %2 = "ik.constant"() {value = dense<0.59460354> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%k, %2) : (tensor<2x6x2x8xf32>, tensor<f32>) -> tensor<2x6x2x8xf32>
  %4 = "ik.reshape"(%1) {shape = array<i64: 2, 6, 2, 2, 8>} : (tensor<2x6x4x8xf32>) -> tensor<2x6x2x2x8xf32>
  %5 = "ik.contract"(%4, %3) {lhs_batch = array<i64: 0, 2>, lhs_contract = array<i64: 4>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 3>} : (tensor<2x6x2x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x2x6x2x6xf32>
  %6 = "ik.transpose"(%5) {perm = array<i64: 0, 1, 3, 2, 4>} : (tensor<2x2x6x2x6xf32>) -> tensor<2x2x2x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x2x2x6x6xf32>) -> tensor<2x2x2x6x6xf32>
  %8 = "ik.contract"(%7, %v) {lhs_batch = array<i64: 0, 1>, lhs_contract = array<i64: 4>, rhs_batch = array<i64: 0, 2>, rhs_contract = array<i64: 1>} : (tensor<2x2x2x6x6xf32>, tensor<2x6x2x8xf32>) -> tensor<2x2x2x6x8xf32>
  %9 = "ik.transpose"(%8) {perm = array<i64: 0, 3, 1, 2, 4>} : (tensor<2x2x2x6x8xf32>) -> tensor<2x6x2x2x8xf32>
  %10 = "ik.reshape"(%9) {shape = array<i64: 2, 6, 4, 8>} : (tensor<2x6x2x2x8xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%10) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "jax_grouped_scale_on_q_and_k"} : () -> ()
