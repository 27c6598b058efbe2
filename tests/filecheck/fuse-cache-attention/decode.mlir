// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p fuse-cache-attention,dce --split-input-file --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN

// EXPLAIN-NOT: not fused

// GPT-2's static cache (index_copy_ -> scatter_nd on the sequence-first view, rows [B, S, H, D]): one op,
// the rows transposed to BHSD, the caches' outputs and aliases kept.
// CHECK-LABEL: "func.func"
// CHECK: ^bb0(
// CHECK: %[[P:[0-9]+]] = "ik.reshape"
// CHECK: %[[K:[0-9]+]] = "ik.transpose"(%k_rows) {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[V:[0-9]+]] = "ik.transpose"(%v_rows)
// CHECK-NOT: "ik.scatter_nd"
// CHECK: %[[R:[0-9]+]]:3 = "ik.cache_attention"(%q, %[[K]], %[[V]], %key_cache, %value_cache, %[[P]]) {scale = 0.5 : f64}
// CHECK-NOT: "ik.attention"
// CHECK: "func.return"(%[[R]]#0, %[[R]]#1, %[[R]]#2)
// CHECK: sym_name = "mha", aliases = [[1, 4], [2, 5]]
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
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "mha", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// Llama's grouped-query attention: the repeat_kv (reshape + broadcast + reshape) of the updated cache is
// dropped; the op takes the 2-head cache and the 4 query heads.
// CHECK-LABEL: "func.func"
// CHECK: "ik.cache_attention"(%q, %{{[0-9]+}}, %{{[0-9]+}}, %key_cache, %value_cache, %{{[0-9]+}}) {{.*}} : (tensor<1x4x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<i64>)
// CHECK-NOT: "ik.broadcast"
// CHECK: sym_name = "gqa", aliases = [[1, 4], [2, 5]]
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x2x4xf32>, %v_rows: tensor<1x1x2x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x2x8x4xf32>, %value_cache: tensor<1x2x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x2x8x4xf32>) -> tensor<8x1x2x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x2x4xf32>, tensor<1x1xi64>, tensor<1x1x2x4xf32>) -> tensor<8x1x2x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x2x4xf32>) -> tensor<1x2x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x2x8x4xf32>) -> tensor<8x1x2x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x2x4xf32>, tensor<1x1xi64>, tensor<1x1x2x4xf32>) -> tensor<8x1x2x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x2x4xf32>) -> tensor<1x2x8x4xf32>
  %14 = "ik.reshape"(%8) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %15 = "ik.broadcast"(%14) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %16 = "ik.reshape"(%15) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %17 = "ik.reshape"(%13) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %18 = "ik.broadcast"(%17) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %19 = "ik.reshape"(%18) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %20 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %21 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %22 = "ik.le"(%21, %20) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %23 = "ik.attention"(%q, %16, %19, %22) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%23, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1xi64>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>), sym_name = "gqa", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// Mistral's sliding window: the prefix mask and-ed with the window condition; the window stays as the
// op's extra mask operand.
// CHECK-LABEL: "func.func"
// CHECK: %[[W:[0-9]+]] = "ik.gt"
// CHECK: "ik.cache_attention"(%q, %{{[0-9]+}}, %{{[0-9]+}}, %key_cache, %value_cache, %{{[0-9]+}}, %[[W]])
// CHECK-NOT: "ik.attention"
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x2x4xf32>, %v_rows: tensor<1x1x2x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x2x8x4xf32>, %value_cache: tensor<1x2x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x2x8x4xf32>) -> tensor<8x1x2x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x2x4xf32>, tensor<1x1xi64>, tensor<1x1x2x4xf32>) -> tensor<8x1x2x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x2x4xf32>) -> tensor<1x2x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x2x8x4xf32>) -> tensor<8x1x2x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 1, 1>} : (tensor<1xi64>) -> tensor<1x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x2x4xf32>, tensor<1x1xi64>, tensor<1x1x2x4xf32>) -> tensor<8x1x2x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x2x4xf32>) -> tensor<1x2x8x4xf32>
  %14 = "ik.reshape"(%8) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %15 = "ik.broadcast"(%14) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %16 = "ik.reshape"(%15) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %17 = "ik.reshape"(%13) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %18 = "ik.broadcast"(%17) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %19 = "ik.reshape"(%18) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %20 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %21 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %22 = "ik.le"(%21, %20) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %23 = "ik.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
  %24 = "ik.sub"(%20, %23) : (tensor<1x1x1x1xi64>, tensor<i64>) -> tensor<1x1x1x1xi64>
  %25 = "ik.gt"(%21, %24) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %26 = "ik.and"(%25, %22) : (tensor<1x1x1x8xi1>, tensor<1x1x1x8xi1>) -> tensor<1x1x1x8xi1>
  %27 = "ik.attention"(%q, %16, %19, %26) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%27, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1xi64>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>), sym_name = "window", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// The cache written with dynamic_update_slice at [0, 0, p, 0] (JAX / donation style).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.dynamic_update_slice"
// CHECK: "ik.cache_attention"(%q, %{{[0-9]+}}, %{{[0-9]+}}, %key_cache, %value_cache, %{{[0-9]+}})
// CHECK-NOT: "ik.dynamic_update_slice"
// CHECK: sym_name = "dus", aliases = [[1, 4], [2, 5]]
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x1x4x4xf32>, %v_rows: tensor<1x1x4x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.constant"() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %5 = "ik.reshape"(%1) {shape = array<i64: 1>} : (tensor<i64>) -> tensor<1xi64>
  %6 = "ik.concat"(%4, %4, %5, %4) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %7 = "ik.transpose"(%k_rows) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x4x1x4xf32>
  %8 = "ik.dynamic_update_slice"(%key_cache, %7, %6) : (tensor<1x4x8x4xf32>, tensor<1x4x1x4xf32>, tensor<4xi64>) -> tensor<1x4x8x4xf32>
  %9 = "ik.constant"() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %10 = "ik.reshape"(%1) {shape = array<i64: 1>} : (tensor<i64>) -> tensor<1xi64>
  %11 = "ik.concat"(%9, %9, %10, %9) {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %12 = "ik.transpose"(%v_rows) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x1x4x4xf32>) -> tensor<1x4x1x4xf32>
  %13 = "ik.dynamic_update_slice"(%value_cache, %12, %11) : (tensor<1x4x8x4xf32>, tensor<1x4x1x4xf32>, tensor<4xi64>) -> tensor<1x4x8x4xf32>
  %14 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %15 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %16 = "ik.le"(%15, %14) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %17 = "ik.attention"(%q, %8, %13, %16) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%17, %8, %13) : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "dus", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// Prefill: S = 2 rows written at [p, p+2), query i attending to keys j <= p + i.
// CHECK-LABEL: "func.func"
// CHECK: "ik.cache_attention"{{.*}} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<i64>)
"func.func"() ({
^bb0(%q: tensor<1x4x2x4xf32>, %k_rows: tensor<1x2x4x4xf32>, %v_rows: tensor<1x2x4x4xf32>, %cache_position: tensor<2xi64>, %key_cache: tensor<1x4x8x4xf32>, %value_cache: tensor<1x4x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<2xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 2>} : () -> tensor<2xi64>
  %3 = "ik.add"(%2, %1) : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %4 = "ik.transpose"(%key_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %5 = "ik.transpose"(%k_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x2x4x4xf32>) -> tensor<2x1x4x4xf32>
  %6 = "ik.reshape"(%3) {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
  %7 = "ik.scatter_nd"(%4, %6, %5) : (tensor<8x1x4x4xf32>, tensor<2x1xi64>, tensor<2x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %8 = "ik.transpose"(%7) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %9 = "ik.transpose"(%value_cache) {perm = array<i64: 2, 0, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<8x1x4x4xf32>
  %10 = "ik.transpose"(%v_rows) {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x2x4x4xf32>) -> tensor<2x1x4x4xf32>
  %11 = "ik.reshape"(%3) {shape = array<i64: 2, 1>} : (tensor<2xi64>) -> tensor<2x1xi64>
  %12 = "ik.scatter_nd"(%9, %11, %10) : (tensor<8x1x4x4xf32>, tensor<2x1xi64>, tensor<2x1x4x4xf32>) -> tensor<8x1x4x4xf32>
  %13 = "ik.transpose"(%12) {perm = array<i64: 1, 2, 0, 3>} : (tensor<8x1x4x4xf32>) -> tensor<1x4x8x4xf32>
  %14 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 2, 1>} : (tensor<2xi64>) -> tensor<1x1x2x1xi64>
  %15 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %16 = "ik.le"(%15, %14) : (tensor<8xi64>, tensor<1x1x2x1xi64>) -> tensor<1x1x2x8xi1>
  %17 = "ik.attention"(%q, %8, %13, %16) {scale = 0.5 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x2x8xi1>) -> tensor<1x4x2x4xf32>
  "func.return"(%17, %8, %13) : (tensor<1x4x2x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<2xi64>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>), sym_name = "prefill", aliases = [[1, 4], [2, 5]]} : () -> ()

// -----

// index_copy_ imported as scatter_elements along the sequence axis (the index iota(S) + p broadcast to the
// rows), GQA: the rows go in as they are (already BHSD).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.scatter_elements"
// CHECK: "ik.cache_attention"(%q, %k_rows, %v_rows, %key_cache, %value_cache, %{{[0-9]+}}) {scale = 0.5 : f64}
// CHECK-NOT: "ik.scatter_elements"
// CHECK: sym_name = "scatter_elements", aliases = [[1, 4], [2, 5]]
"func.func"() ({
^bb0(%q: tensor<1x4x1x4xf32>, %k_rows: tensor<1x2x1x4xf32>, %v_rows: tensor<1x2x1x4xf32>, %cache_position: tensor<1xi64>, %key_cache: tensor<1x2x8x4xf32>, %value_cache: tensor<1x2x8x4xf32>):
  %0 = "ik.slice"(%cache_position) {limit = array<i64: 1>, start = array<i64: 0>} : (tensor<1xi64>) -> tensor<1xi64>
  %1 = "ik.reshape"(%0) {shape = array<i64>} : (tensor<1xi64>) -> tensor<i64>
  %2 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 1>} : () -> tensor<1xi64>
  %3 = "ik.add"(%2, %1) : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %4 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %5 = "ik.broadcast"(%4) {shape = array<i64: 1, 2, 1, 4>} : (tensor<1x1x1x1xi64>) -> tensor<1x2x1x4xi64>
  %6 = "ik.scatter_elements"(%key_cache, %5, %k_rows) {axis = 2 : i64} : (tensor<1x2x8x4xf32>, tensor<1x2x1x4xi64>, tensor<1x2x1x4xf32>) -> tensor<1x2x8x4xf32>
  %7 = "ik.scatter_elements"(%value_cache, %5, %v_rows) {axis = 2 : i64} : (tensor<1x2x8x4xf32>, tensor<1x2x1x4xi64>, tensor<1x2x1x4xf32>) -> tensor<1x2x8x4xf32>
  %8 = "ik.iota"() {axis = 0 : i64, dtype = i64, shape = array<i64: 8>} : () -> tensor<8xi64>
  %9 = "ik.reshape"(%3) {shape = array<i64: 1, 1, 1, 1>} : (tensor<1xi64>) -> tensor<1x1x1x1xi64>
  %10 = "ik.le"(%8, %9) : (tensor<8xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x8xi1>
  %11 = "ik.reshape"(%6) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %12 = "ik.broadcast"(%11) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %13 = "ik.reshape"(%12) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %14 = "ik.reshape"(%7) {shape = array<i64: 1, 2, 1, 8, 4>} : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %15 = "ik.broadcast"(%14) {shape = array<i64: 1, 2, 2, 8, 4>} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %16 = "ik.reshape"(%15) {shape = array<i64: 1, 4, 8, 4>} : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %17 = "ik.attention"(%q, %13, %16, %10) {scale = 0.5 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xi1>) -> tensor<1x4x1x4xf32>
  "func.return"(%17, %6, %7) : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> ()
}) {function_type = (tensor<1x4x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1xi64>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>), sym_name = "scatter_elements", aliases = [[1, 4], [2, 5]]} : () -> ()
