// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s

// torch.where(tril, scores, finfo.min) with a lower-triangular constant: causal.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true, scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.where"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>} : () -> tensor<6x6xi1>
  %5 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %3, %5) : (tensor<6x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%8) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "causal_where"} : () -> ()

// -----

// A slice [:, :, :S, :S] of a registered 16x16 lower-triangular buffer, S symbolic.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true
// CHECK-NOT: "ik.slice"
"func.func"() ({
^bb0(%q: tensor<?x4x?x8xf32, ["B", "S"]>, %k: tensor<?x4x?x8xf32, ["B", "S"]>, %v: tensor<?x4x?x8xf32, ["B", "S"]>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x8x?xf32, ["B", "S"]>
  %1 = "ik.matmul"(%q, %0) : (tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x8x?xf32, ["B", "S"]>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<f32>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %4 = "ik.constant"() {value = dense<[[[[true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true]]]]> : tensor<1x1x16x16xi1>} : () -> tensor<1x1x16x16xi1>
  %5 = "ik.slice"(%4) {limit = [1 : i64, 1 : i64, "S", "S"], start = array<i64: 0, 0, 0, 0>} : (tensor<1x1x16x16xi1>) -> tensor<1x1x?x?xi1, ["S", "S"]>
  %6 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.where"(%5, %3, %6) : (tensor<1x1x?x?xi1, ["S", "S"]>, tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<f32>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %8 = "ik.softmax"(%7) {axis = -1 : i64} : (tensor<?x4x?x?xf32, ["B", "S", "S"]>) -> tensor<?x4x?x?xf32, ["B", "S", "S"]>
  %9 = "ik.matmul"(%8, %v) : (tensor<?x4x?x?xf32, ["B", "S", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x?x8xf32, ["B", "S"]>
  "func.return"(%9) : (tensor<?x4x?x8xf32, ["B", "S"]>) -> ()
}) {function_type = (tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>, tensor<?x4x?x8xf32, ["B", "S"]>) -> tensor<?x4x?x8xf32, ["B", "S"]>, sym_name = "causal_buffer"} : () -> ()

// -----

// Causal from comparing iotas (col <= row), as Llama builds it.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 6, 6>} : () -> tensor<6x6xi64>
  %5 = "ik.iota"() {axis = 1 : i64, dtype = i64, shape = array<i64: 6, 6>} : () -> tensor<6x6xi64>
  %6 = "ik.le"(%5, %4) : (tensor<6x6xi64>, tensor<6x6xi64>) -> tensor<6x6xi1>
  %7 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %8 = "ik.where"(%6, %3, %7) : (tensor<6x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %9 = "ik.softmax"(%8) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.matmul"(%9, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%10) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "causal_iota"} : () -> ()

// -----

// masked_fill(~causal, -inf): the fill on the then side, a not on the condition.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true
// CHECK-NOT: "ik.not"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>} : () -> tensor<6x6xi1>
  %5 = "ik.not"(%4) : (tensor<6x6xi1>) -> tensor<6x6xi1>
  %6 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.where"(%5, %6, %3) : (tensor<6x6xi1>, tensor<f32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.softmax"(%7) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %9 = "ik.matmul"(%8, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%9) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "masked_fill_inf"} : () -> ()

// -----

// An additive causal mask where(tril, 0, -inf) added to the scores.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>} : () -> tensor<6x6xi1>
  %5 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.where"(%4, %5, %6) : (tensor<6x6xi1>, tensor<f32>, tensor<f32>) -> tensor<6x6xf32>
  %8 = "ik.add"(%3, %7) : (tensor<2x4x6x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6x6xf32>
  %9 = "ik.softmax"(%8) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.matmul"(%9, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%10) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "additive_inf"} : () -> ()

// -----

// BERT's (1 - m) * -10000 from an int64 attention_mask (B, S) -> (B, 1, 1, S): an explicit keep-mask m != 0.
// CHECK-LABEL: "func.func"
// CHECK: %[[M:.*]] = "ik.reshape"(%attention_mask)
// CHECK: %[[KEEP:.*]] = "ik.ne"(%[[M]], 
// CHECK: "ik.attention"(%q, %k, %v, %[[KEEP]]) {scale = 0.3535533{{[0-9]*}} : f64} : ({{.*}}, tensor<2x1x1x6xi1>)
// CHECK-NOT: "ik.sub"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>, %attention_mask: tensor<2x6xi64>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.reshape"(%attention_mask) {shape = array<i64: 2, 1, 1, 6>} : (tensor<2x6xi64>) -> tensor<2x1x1x6xi64>
  %5 = "ik.cast"(%4) {to = f32} : (tensor<2x1x1x6xi64>) -> tensor<2x1x1x6xf32>
  %6 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.sub"(%6, %5) : (tensor<f32>, tensor<2x1x1x6xf32>) -> tensor<2x1x1x6xf32>
  %8 = "ik.constant"() {value = dense<-10000.0> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<2x1x1x6xf32>, tensor<f32>) -> tensor<2x1x1x6xf32>
  %10 = "ik.add"(%3, %9) : (tensor<2x4x6x6xf32>, tensor<2x1x1x6xf32>) -> tensor<2x4x6x6xf32>
  %11 = "ik.softmax"(%10) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %12 = "ik.matmul"(%11, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%12) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x6xi64>) -> tensor<2x4x6x8xf32>, sym_name = "padding_additive"} : () -> ()

// -----

// The same padding mask with finfo.min (T5, HF): an explicit keep-mask.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v, %{{[0-9]+}}) {scale = {{.*}}} : ({{.*}}, tensor<2x1x1x6xi1>)
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>, %attention_mask: tensor<2x6xi64>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.reshape"(%attention_mask) {shape = array<i64: 2, 1, 1, 6>} : (tensor<2x6xi64>) -> tensor<2x1x1x6xi64>
  %5 = "ik.cast"(%4) {to = f32} : (tensor<2x1x1x6xi64>) -> tensor<2x1x1x6xf32>
  %6 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.sub"(%6, %5) : (tensor<f32>, tensor<2x1x1x6xf32>) -> tensor<2x1x1x6xf32>
  %8 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<2x1x1x6xf32>, tensor<f32>) -> tensor<2x1x1x6xf32>
  %10 = "ik.add"(%3, %9) : (tensor<2x4x6x6xf32>, tensor<2x1x1x6xf32>) -> tensor<2x4x6x6xf32>
  %11 = "ik.softmax"(%10) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %12 = "ik.matmul"(%11, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%12) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x6xi64>) -> tensor<2x4x6x8xf32>, sym_name = "padding_finfo"} : () -> ()

// -----

// A boolean keep-mask applied with where(m, scores, -inf).
// CHECK-LABEL: "func.func"
// CHECK: %[[M:.*]] = "ik.reshape"(%attention_mask)
// CHECK: "ik.attention"(%q, %k, %v, %[[M]])
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>, %attention_mask: tensor<2x6xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.reshape"(%attention_mask) {shape = array<i64: 2, 1, 1, 6>} : (tensor<2x6xi1>) -> tensor<2x1x1x6xi1>
  %5 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %3, %5) : (tensor<2x1x1x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%8) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x6xi1>) -> tensor<2x4x6x8xf32>, sym_name = "padding_bool"} : () -> ()

// -----

// Causal (where, -1e9) and additive padding together: causal plus an explicit mask.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v, %{{[0-9]+}}) {causal = true, scale = {{.*}}} : ({{.*}}, tensor<2x1x1x6xi1>)
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>, %attention_mask: tensor<2x6xi64>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.constant"() {value = dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]> : tensor<6x6xi1>} : () -> tensor<6x6xi1>
  %5 = "ik.constant"() {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%4, %3, %5) : (tensor<6x6xi1>, tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.reshape"(%attention_mask) {shape = array<i64: 2, 1, 1, 6>} : (tensor<2x6xi64>) -> tensor<2x1x1x6xi64>
  %8 = "ik.cast"(%7) {to = f32} : (tensor<2x1x1x6xi64>) -> tensor<2x1x1x6xf32>
  %9 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %10 = "ik.sub"(%9, %8) : (tensor<f32>, tensor<2x1x1x6xf32>) -> tensor<2x1x1x6xf32>
  %11 = "ik.constant"() {value = dense<-10000.0> : tensor<f32>} : () -> tensor<f32>
  %12 = "ik.mul"(%10, %11) : (tensor<2x1x1x6xf32>, tensor<f32>) -> tensor<2x1x1x6xf32>
  %13 = "ik.add"(%6, %12) : (tensor<2x4x6x6xf32>, tensor<2x1x1x6xf32>) -> tensor<2x4x6x6xf32>
  %14 = "ik.softmax"(%13) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %15 = "ik.matmul"(%14, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%15) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x6xi64>) -> tensor<2x4x6x8xf32>, sym_name = "causal_and_padding"} : () -> ()

// -----

// A float tensor added to the scores (T5's position bias) is a bias, not a mask.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v, %bias) {operandSegmentSizes = array<i64: 1, 1, 1, 0, 1>, scale = 0.3535533{{[0-9]*}} : f64}
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>, %bias: tensor<1x4x6x6xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.add"(%3, %bias) : (tensor<2x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.matmul"(%5, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%6) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<1x4x6x6xf32>) -> tensor<2x4x6x8xf32>, sym_name = "position_bias"} : () -> ()

// -----

// torch's _safe_softmax guard where(any(scores != -inf), softmax, 0) fuses with the softmax.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f64}
// CHECK-NOT: "ik.reduce_max"
"func.func"() ({
^bb0(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>):
  %0 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 6, 6>} : () -> tensor<6x6xi64>
  %1 = "ik.iota"() {axis = 1 : i64, dtype = i64, shape = array<i64: 6, 6>} : () -> tensor<6x6xi64>
  %2 = "ik.le"(%1, %0) : (tensor<6x6xi64>, tensor<6x6xi64>) -> tensor<6x6xi1>
  %3 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.where"(%2, %3, %4) : (tensor<6x6xi1>, tensor<f32>, tensor<f32>) -> tensor<6x6xf32>
  %6 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x6x8xf32>) -> tensor<1x2x8x6xf32>
  %7 = "ik.matmul"(%q, %6) : (tensor<1x2x6x8xf32>, tensor<1x2x8x6xf32>) -> tensor<1x2x6x6xf32>
  %8 = "ik.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %10 = "ik.add"(%9, %5) : (tensor<1x2x6x6xf32>, tensor<6x6xf32>) -> tensor<1x2x6x6xf32>
  %11 = "ik.softmax"(%10) {axis = -1 : i64} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %12 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %13 = "ik.ne"(%10, %12) : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xi1>
  %14 = "ik.cast"(%13) {to = i8} : (tensor<1x2x6x6xi1>) -> tensor<1x2x6x6xi8>
  %15 = "ik.reduce_max"(%14) {axes = array<i64: 3>, keepdims = true} : (tensor<1x2x6x6xi8>) -> tensor<1x2x6x1xi8>
  %16 = "ik.cast"(%15) {to = i1} : (tensor<1x2x6x1xi8>) -> tensor<1x2x6x1xi1>
  %17 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %18 = "ik.where"(%16, %11, %17) : (tensor<1x2x6x1xi1>, tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %19 = "ik.matmul"(%18, %v) : (tensor<1x2x6x6xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  "func.return"(%19) : (tensor<1x2x6x8xf32>) -> ()
}) {function_type = (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>, sym_name = "safe_softmax"} : () -> ()

// -----

// The NaN guard of torch's ONNX export, where(isnan(p), 0, p), with IsNaN as ik.isnan, fuses with the softmax.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v, %m) {scale = 0.125 : f64}
// CHECK-NOT: "ik.isnan"
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x6x6xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x6x8xf32>) -> tensor<1x2x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x6x8xf32>, tensor<1x2x8x6xf32>) -> tensor<1x2x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %4 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.where"(%m, %3, %4) : (tensor<1x1x6x6xi1>, tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %7 = "ik.isnan"(%6) : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xi1>
  %8 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.where"(%7, %8, %6) : (tensor<1x2x6x6xi1>, tensor<f32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %10 = "ik.matmul"(%9, %v) : (tensor<1x2x6x6xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  "func.return"(%10) : (tensor<1x2x6x8xf32>) -> ()
}) {function_type = (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x6x6xi1>) -> tensor<1x2x6x8xf32>, sym_name = "isnan_guard"} : () -> ()
