// RUN: irkit opt %s -p fuse-activation --split-input-file --check-rewrites | filecheck %s
// GPT-2's gelu_new after canonicalize: the exporter's view [128, 1024] -> [1, 128, 1024]
// is dropped where an elementwise op broadcasts anyway, so the expression reads x both
// as %x and as its reshape. A reshape of leading 1s keeps the elements in order: one
// variable, one gelu, reshaped to the root's shape.

// CHECK-LABEL: "func.func"
// CHECK: %[[G:.*]] = "ik.gelu"(%x) {approximate = "tanh"} {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: "ik.reshape"(%[[G]]) {shape = array<i64: 1, 8, 16>}
// CHECK-NOT: "ik.tanh"
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<8x16xf32>):
    %0 = "ik.reshape"(%x) {shape = array<i64: 1, 8, 16>} : (tensor<8x16xf32>) -> tensor<1x8x16xf32>
    %1 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %2 = "ik.mul"(%0, %1) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
    %3 = "ik.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
    %4 = "ik.pow"(%0, %3) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
    %5 = "ik.constant"() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
    %6 = "ik.mul"(%4, %5) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
    %7 = "ik.add"(%x, %6) : (tensor<8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
    %8 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
    %9 = "ik.mul"(%7, %8) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
    %10 = "ik.tanh"(%9) : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
    %11 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %12 = "ik.add"(%10, %11) : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
    %13 = "ik.mul"(%2, %12) : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
    "func.return"(%13) : (tensor<1x8x16xf32>) -> ()
  }) {function_type = (tensor<8x16xf32>) -> tensor<1x8x16xf32>, sym_name = "main"} : () -> ()
}) : () -> ()

// -----

// Negative: a reshape that regroups elements ([8, 16] -> [16, 8]) is not the same
// variable, so the expression has two leaves and stays as written.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.gelu"
// CHECK: "ik.tanh"
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<8x16xf32>):
    %0 = "ik.reshape"(%x) {shape = array<i64: 16, 8>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %00 = "ik.reshape"(%0) {shape = array<i64: 8, 16>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %1 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %2 = "ik.mul"(%00, %1) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %3 = "ik.constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
    %4 = "ik.pow"(%x, %3) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %5 = "ik.constant"() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
    %6 = "ik.mul"(%4, %5) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %7 = "ik.add"(%x, %6) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %8 = "ik.constant"() {value = dense<0.7978846> : tensor<f32>} : () -> tensor<f32>
    %9 = "ik.mul"(%7, %8) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %10 = "ik.tanh"(%9) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %11 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %12 = "ik.add"(%10, %11) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %13 = "ik.mul"(%2, %12) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%13) : (tensor<8x16xf32>) -> ()
  }) {function_type = (tensor<8x16xf32>) -> tensor<8x16xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
