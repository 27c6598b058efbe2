// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// The mask is key < position + query (lt): it drops the key just written, not the prefix mask.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.cache_attention"
// CHECK: "ik.scatter_nd"
// CHECK: "ik.attention"
// EXPLAIN: fuse-cache-attention: 'ik.attention' at unknown location not fused: the mask is not the prefix mask key <= position + query (le/ge of iota)
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x4x4xf32>, %v_rows: tensor<1x1x4x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %14 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %15 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %16 = "ik.lt"(%15, %14) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %17 = "ik.attention"(%q, %8, %13, %16) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%17, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "not_prefix", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// The mask's positions are p + 1 + i, not the write position p + i.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.cache_attention"
// CHECK: "ik.scatter_nd"
// CHECK: "ik.attention"
// EXPLAIN: fuse-cache-attention: 'ik.attention' at unknown location not fused: the mask's query positions are not iota(S) + position
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x4x4xf32>, %v_rows: tensor<1x1x4x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %14 = "ik.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %15 = "ik.add"(%3, %14) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %16 = "ik.reshape"(%15) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %17 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %18 = "ik.le"(%17, %16) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %19 = "ik.attention"(%q, %8, %13, %18) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%19, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "wrong_pos", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// The old cache is read (a reduction before the write, returned too): fusing would hide that read.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.cache_attention"
// CHECK: "ik.scatter_nd"
// CHECK: "ik.attention"
// EXPLAIN: fuse-cache-attention: 'ik.attention' at unknown location not fused: the cache argument %key_cache is read besides being written (the old cache is read)
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x4x4xf32>, %v_rows: tensor<1x1x4x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.reduce_sum"(%key_cache) {axes = array<i64: 2>, keepdims = false} : (tensor<1x4x8x4xf32>) -> tensor<1x4x4xf32>
  %5 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %6 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %7 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %8 = "ik.scatter_nd"(%5, %7, %6) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %9 = "ik.transpose"(%8) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %10 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %11 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %12 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %13 = "ik.scatter_nd"(%10, %12, %11) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %14 = "ik.transpose"(%13) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %15 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %16 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %17 = "ik.le"(%16, %15) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %18 = "ik.attention"(%q, %9, %14, %17) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%18, %9, %14, %4) : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x4xf32>), sym_name = "read_before", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// No 'aliases': the written caches are plain outputs, not state; nothing is fused.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.cache_attention"
// CHECK: "ik.attention"
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x4x4xf32>, %v_rows: tensor<1x1x4x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x4x4xf32>, tensor<1x1xi64>, tensor<1x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %14 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %15 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %16 = "ik.le"(%15, %14) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %17 = "ik.attention"(%q, %8, %13, %16) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%17, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "no_alias"} : () -> ()
