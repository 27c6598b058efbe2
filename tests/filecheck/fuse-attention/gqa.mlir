// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s

// Llama's repeat_kv: expand + reshape of 2 KV heads to 4 query heads; K and V are passed un-repeated.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {{.*}} : (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
// CHECK-NOT: "ik.broadcast"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>):
  %0 = "ik.reshape"(%k) {shape = array<i64: 2, 2, 1, 6, 8>} : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %1 = "ik.broadcast"(%0) {shape = array<i64: 2, 2, 2, 6, 8>} : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 2, 4, 6, 8>} : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
  %3 = "ik.reshape"(%v) {shape = array<i64: 2, 2, 1, 6, 8>} : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %4 = "ik.broadcast"(%3) {shape = array<i64: 2, 2, 2, 6, 8>} : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %5 = "ik.reshape"(%4) {shape = array<i64: 2, 4, 6, 8>} : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
  %6 = "ik.transpose"(%2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %7 = "ik.matmul"(%q, %6) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %11 = "ik.matmul"(%10, %5) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%11) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "gqa_expand"} : () -> ()

// -----

// repeat_interleave as an index gather [0, 0, 1, 1] on the head axis (BSHD layout).
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"({{.*}}) {{.*}} : (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
// CHECK-NOT: "ik.gather"
"func.func"() ({
^bb0(%q: tensor<2x6x4x8xf32>, %k: tensor<2x6x2x8xf32>, %v: tensor<2x6x2x8xf32>):
  %0 = "ik.constant"() {value = dense<[0, 0, 1, 1]> : tensor<4xi64>} : () -> tensor<4xi64>
  %1 = "ik.gather"(%k, %0) {axis = 2 : i64} : (tensor<2x6x2x8xf32>, tensor<4xi64>) -> tensor<2x6x4x8xf32>
  %2 = "ik.constant"() {value = dense<[0, 0, 1, 1]> : tensor<4xi64>} : () -> tensor<4xi64>
  %3 = "ik.gather"(%v, %2) {axis = 2 : i64} : (tensor<2x6x2x8xf32>, tensor<4xi64>) -> tensor<2x6x4x8xf32>
  %4 = "ik.transpose"(%q) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %5 = "ik.transpose"(%1) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x8x6xf32>
  %6 = "ik.transpose"(%3) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x6x4x8xf32>) -> tensor<2x4x6x8xf32>
  %7 = "ik.matmul"(%4, %5) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %8 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %11 = "ik.matmul"(%10, %6) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  %12 = "ik.transpose"(%11) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x6x8xf32>) -> tensor<2x6x4x8xf32>
  "func.return"(%12) : (tensor<2x6x4x8xf32>) -> ()
}) {function_type = (tensor<2x6x4x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x6x4x8xf32>, sym_name = "gqa_gather"} : () -> ()

// -----

// Negative for GQA: heads tiled (h reads kv head h % 2) are not grouped-query heads;
// the attention fuses with the tiled K and V as they are.
// CHECK-LABEL: "func.func"
// CHECK: "ik.broadcast"
// CHECK: "ik.attention"({{.*}}) {{.*}} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>)
"func.func"() ({
^bb0(%q: tensor<1x4x6x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>):
  %0 = "ik.reshape"(%k) {shape = array<i64: 1, 1, 2, 6, 8>} : (tensor<1x2x6x8xf32>) -> tensor<1x1x2x6x8xf32>
  %1 = "ik.broadcast"(%0) {shape = array<i64: 1, 2, 2, 6, 8>} : (tensor<1x1x2x6x8xf32>) -> tensor<1x2x2x6x8xf32>
  %2 = "ik.reshape"(%1) {shape = array<i64: 1, 4, 6, 8>} : (tensor<1x2x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  %3 = "ik.reshape"(%v) {shape = array<i64: 1, 1, 2, 6, 8>} : (tensor<1x2x6x8xf32>) -> tensor<1x1x2x6x8xf32>
  %4 = "ik.broadcast"(%3) {shape = array<i64: 1, 2, 2, 6, 8>} : (tensor<1x1x2x6x8xf32>) -> tensor<1x2x2x6x8xf32>
  %5 = "ik.reshape"(%4) {shape = array<i64: 1, 4, 6, 8>} : (tensor<1x2x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  %6 = "ik.transpose"(%2) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x6x8xf32>) -> tensor<1x4x8x6xf32>
  %7 = "ik.matmul"(%q, %6) : (tensor<1x4x6x8xf32>, tensor<1x4x8x6xf32>) -> tensor<1x4x6x6xf32>
  %8 = "ik.constant"() {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %9 = "ik.mul"(%7, %8) : (tensor<1x4x6x6xf32>, tensor<f32>) -> tensor<1x4x6x6xf32>
  %10 = "ik.softmax"(%9) {axis = -1 : i64} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %11 = "ik.matmul"(%10, %5) : (tensor<1x4x6x6xf32>, tensor<1x4x6x8xf32>) -> tensor<1x4x6x8xf32>
  "func.return"(%11) : (tensor<1x4x6x8xf32>) -> ()
}) {function_type = (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>, sym_name = "gqa_tile"} : () -> ()
