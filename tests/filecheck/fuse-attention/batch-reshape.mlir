// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file --check-rewrites --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// BLOOM's baddbmm: the scores are viewed as [B*H, S, S], scaled, given the ALiBi term [B*H, 1, S], and viewed
// back as [B, H, S, S] before the mask. The ALiBi term becomes the bias, reshaped to [B, H, 1, S].
// CHECK-LABEL: "func.func"
// CHECK: %[[A:.*]] = "ik.reshape"(%alibi) {shape = array<i64: 2, 2, 1, 4>}
// CHECK: "ik.attention"(%q, %k, %v, {{%.*}}, %[[A]]) {causal = true, scale = 0.25 : f64}
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %alibi: tensor<4x1x4xf32>, %pad: tensor<2x1x4x4xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 4, 4, 4>} : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %3 = "ik.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %5 = "ik.add"(%alibi, %4) : (tensor<4x1x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %6 = "ik.reshape"(%5) {shape = array<i64: 2, 2, 4, 4>} : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
  %7 = "ik.iota"() {axis = 0 : i64, shape = array<i64: 4, 4>} : () -> tensor<4x4xi64>
  %8 = "ik.iota"() {axis = 1 : i64, shape = array<i64: 4, 4>} : () -> tensor<4x4xi64>
  %9 = "ik.ge"(%7, %8) : (tensor<4x4xi64>, tensor<4x4xi64>) -> tensor<4x4xi1>
  %10 = "ik.and"(%pad, %9) : (tensor<2x1x4x4xi1>, tensor<4x4xi1>) -> tensor<2x1x4x4xi1>
  %11 = "ik.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %12 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %13 = "ik.where"(%10, %11, %12) : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %14 = "ik.add"(%6, %13) : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %15 = "ik.softmax"(%14) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %16 = "ik.matmul"(%15, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  "func.return"(%16) : (tensor<2x2x4x8xf32>) -> ()
}) {function_type = (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<4x1x4xf32>, tensor<2x1x4x4xi1>) -> tensor<2x2x4x8xf32>, sym_name = "bloom_alibi"} : () -> ()

// -----

// DeBERTa-v2: content-to-position and position-to-content terms [B*H, S, S] added to the scaled scores in the
// [B*H, S, S] view, then the view back and the keep-mask filled with finfo.min: one bias [B, H, S, S], with the
// keep-mask folded into it (a padded query row, every key masked, keeps the unfused mean of V).
// CHECK-LABEL: "func.func"
// CHECK: %[[C:.*]] = "ik.add"(%c2p, %p2c)
// CHECK: %[[B:.*]] = "ik.reshape"(%[[C]]) {shape = array<i64: 2, 2, 4, 4>}
// CHECK: %[[F:.*]] = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>}
// CHECK: %[[W:.*]] = "ik.where"(%keep, %[[B]], %[[F]])
// CHECK: "ik.attention"(%q, %k, %v, %[[W]]) {operandSegmentSizes = array<i64: 1, 1, 1, 0, 1>, scale = 0.14433756{{[0-9]*}} : f64}
// EXPLAIN: fused: the keep-mask filled with a finite minimum is folded into the bias (a row with every key masked keeps the unfused mean of V)
"func.func"() ({
^bb0(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %c2p: tensor<4x4x4xf32>, %p2c: tensor<4x4x4xf32>, %keep: tensor<2x1x4x4xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 4, 4, 4>} : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %3 = "ik.constant"() {value = dense<0.14433756> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %5 = "ik.add"(%c2p, %p2c) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %6 = "ik.add"(%4, %5) : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %7 = "ik.reshape"(%6) {shape = array<i64: 2, 2, 4, 4>} : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
  %8 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.where"(%keep, %7, %8) : (tensor<2x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %11 = "ik.matmul"(%10, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  "func.return"(%11) : (tensor<2x2x4x8xf32>) -> ()
}) {function_type = (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<4x4x4xf32>, tensor<4x4x4xf32>, tensor<2x1x4x4xi1>) -> tensor<2x2x4x8xf32>, sym_name = "deberta_relative_bias"} : () -> ()

// -----

// Negative: a reshape that mixes the query and key dims ([2, 2, 4, 4] viewed as [2, 2, 2, 8]) is not a batch view.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: the scores are reshaped from [2, 2, 2, 8] to [2, 2, 4, 4] at 'ik.reshape' at unknown location, which changes the query/key dims (only batch/head dims may be merged or split)
"func.func"() ({
^bb0(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %b: tensor<2x2x2x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 2, 2, 8>} : (tensor<2x2x4x4xf32>) -> tensor<2x2x2x8xf32>
  %3 = "ik.add"(%2, %b) : (tensor<2x2x2x8xf32>, tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  %4 = "ik.reshape"(%3) {shape = array<i64: 2, 2, 4, 4>} : (tensor<2x2x2x8xf32>) -> tensor<2x2x4x4xf32>
  %5 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %6 = "ik.matmul"(%5, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  "func.return"(%6) : (tensor<2x2x4x8xf32>) -> ()
}) {function_type = (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x2x8xf32>) -> tensor<2x2x4x8xf32>, sym_name = "reshape_mixes_query_key"} : () -> ()

// -----

// Negative: a keep-mask applied in the [B*H, S, S] view, under the reshape: named in the explanation.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.attention"
// EXPLAIN: not fused: a mask is applied under a reshape of the scores (in [4, 4, 4], not the softmax's [2, 2, 4, 4])
"func.func"() ({
^bb0(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %keep: tensor<4x4x4xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 4, 4, 4>} : (tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32>
  %3 = "ik.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.where"(%keep, %2, %3) : (tensor<4x4x4xi1>, tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %5 = "ik.reshape"(%4) {shape = array<i64: 2, 2, 4, 4>} : (tensor<4x4x4xf32>) -> tensor<2x2x4x4xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %7 = "ik.matmul"(%6, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  "func.return"(%7) : (tensor<2x2x4x8xf32>) -> ()
}) {function_type = (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<4x4x4xi1>) -> tensor<2x2x4x8xf32>, sym_name = "mask_under_reshape"} : () -> ()

// -----

// BLOOM at a static batch of 1: the view back from [H, S, S] to [1, H, S, S] is gone (canonicalize folded
// it into the mask's broadcast), so the add that takes the rank-4 mask also puts a leading 1 on the
// scores.  That broadcast is a reshape, and the walk follows it: the ALiBi term (in the [H, S, S] view)
// and the mask both become the bias.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %alibi: tensor<2x1x4xf32>, %mask: tensor<1x1x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 4, 4>} : (tensor<1x2x4x4xf32>) -> tensor<2x4x4xf32>
  %3 = "ik.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %5 = "ik.add"(%alibi, %4) : (tensor<2x1x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %6 = "ik.add"(%5, %mask) : (tensor<2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%8) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x1x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>, sym_name = "bloom_batch1"} : () -> ()

// -----

// DeBERTa at a static batch of 1: the masked_fill's where takes the rank-4 keep-mask and puts a leading 1
// on the [H, S, S] scores; it fuses the same way.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v
// CHECK-NOT: "ik.softmax"
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %keep: tensor<1x1x4x4xi1>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 4, 4>} : (tensor<1x2x4x4xf32>) -> tensor<2x4x4xf32>
  %3 = "ik.constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %5 = "ik.constant"() {value = dense<-3.4028235e+38> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.where"(%keep, %4, %5) : (tensor<1x1x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  "func.return"(%8) : (tensor<1x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x2x4x8xf32>, sym_name = "deberta_batch1"} : () -> ()

// -----

// Negative: a mask with a batch of 2 broadcasts the [H, S, S] scores to two copies, which is not a reshape:
// not fused, and --explain says why.
// CHECK-LABEL: "func.func"
// CHECK: "ik.softmax"
// CHECK-NOT: "ik.attention"
// EXPLAIN: the additive term broadcasts the scores to a larger shape
"func.func"() ({
^bb0(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x1x4x4xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 4, 4>} : (tensor<1x2x4x4xf32>) -> tensor<2x4x4xf32>
  %6 = "ik.add"(%2, %mask) : (tensor<2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %7 = "ik.softmax"(%6) {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %8 = "ik.matmul"(%7, %v) : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  "func.return"(%8) : (tensor<2x2x4x8xf32>) -> ()
}) {function_type = (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x8xf32>, sym_name = "broadcast_batch2"} : () -> ()
