// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// Batch 2 (transformers' StaticCache at batch > 1): the rows are written with scatter_elements along
// axis 2 and the prefix mask is broadcast to the batch; the broadcast is the same keep-mask for every
// row, so the write and the attention fuse.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.scatter_elements"
// CHECK: %[[R:[0-9]+]]:3 = "ik.cache_attention"(%q, %k_rows, %v_rows, %key_cache, %value_cache, %{{[0-9]+}}) {scale = 0.5 : f64}
// CHECK-NOT: "ik.attention"
// CHECK: "func.return"(%[[R]]#0, %[[R]]#1, %[[R]]#2)
// CHECK: sym_name = "batch2", aliases = [[1, 4], [2, 5]]
"func.func"() ({
^bb0(%q: tensor<2x2x1x4xf32>, %k_rows: tensor<2x2x1x4xf32>, %v_rows: tensor<2x2x1x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<2x2x8x4xf32>, %value_cache: tensor<2x2x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %5 = "ik.broadcast"(%4) {shape = array<i64: 2, 2, 1, 4>} : (tensor<1x1x1x1xi64>) -> tensor<2x2x1x4xi64>
  %6 = "ik.scatter_elements"(%key_cache, %5, %k_rows) {axis = 2 : i64, reduction = "none"} : (tensor<2x2x8x4xf32>, tensor<2x2x1x4xi64>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %7 = "ik.scatter_elements"(%value_cache, %5, %v_rows) {axis = 2 : i64, reduction = "none"} : (tensor<2x2x8x4xf32>, tensor<2x2x1x4xi64>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %8 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %9 = "ik.le"(%8, %4) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %10 = "ik.broadcast"(%9) {shape = array<i64: 2, 1, 1, 8>} : (tensor<1x1x1x8xi1>) -> tensor<2x1x1x8xi1>
  %11 = "ik.attention"(%q, %6, %7, %10) {scale = 0.5 : f64} : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x1x1x8xi1>) -> tensor<2x2x1x4xf32>
  "func.return"(%11, %6, %7) : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> ()
}) {function_type = (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<1xi64>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>), sym_name = "batch2", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// Negative: the broadcast mask compares the keys with another position than the write's (%other), so it
// is not the prefix of the written rows: left alone.
// CHECK-LABEL: "func.func"
// CHECK: "ik.scatter_elements"
// CHECK: "ik.attention"
// CHECK-NOT: "ik.cache_attention"
// EXPLAIN: not fused{{.*}}the mask's position is not the position the cache is written at
"func.func"() ({
^bb0(%q: tensor<2x2x1x4xf32>, %k_rows: tensor<2x2x1x4xf32>, %v_rows: tensor<2x2x1x4xf32>, %cache_position: tensor<1xi64>, %other: tensor<i64>, %key_cache: tensor<2x2x8x4xf32>, %value_cache: tensor<2x2x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %5 = "ik.broadcast"(%4) {shape = array<i64: 2, 2, 1, 4>} : (tensor<1x1x1x1xi64>) -> tensor<2x2x1x4xi64>
  %6 = "ik.scatter_elements"(%key_cache, %5, %k_rows) {axis = 2 : i64, reduction = "none"} : (tensor<2x2x8x4xf32>, tensor<2x2x1x4xi64>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %7 = "ik.scatter_elements"(%value_cache, %5, %v_rows) {axis = 2 : i64, reduction = "none"} : (tensor<2x2x8x4xf32>, tensor<2x2x1x4xi64>, tensor<2x2x1x4xf32>) -> tensor<2x2x8x4xf32>
  %8 = "ik.add"(%2, %other) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %9 = "ik.reshape"(%8) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %10 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %11 = "ik.le"(%10, %9) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %12 = "ik.broadcast"(%11) {shape = array<i64: 2, 1, 1, 8>} : (tensor<1x1x1x8xi1>) -> tensor<2x1x1x8xi1>
  %13 = "ik.attention"(%q, %6, %7, %12) {scale = 0.5 : f64} : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x1x1x8xi1>) -> tensor<2x2x1x4xf32>
  "func.return"(%13, %6, %7) : (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> ()
}) {function_type = (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>, tensor<1xi64>, tensor<i64>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x1x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>), sym_name = "other_position", aliases = [[1, 5], [2, 6]]} : () -> ()
