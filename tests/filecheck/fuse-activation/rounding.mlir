// RUN: irkit opt %s -p fuse-activation --split-input-file --check-rewrites | filecheck %s
// Found by the 10,000-graph fuzz: a GELU computed in f32, rounded to f16 and widened
// back, must keep its f16 rounding (the fused op is computed in f32, then the casts stay).

// CHECK-LABEL: "func.func"
// CHECK: %[[G:.*]] = "ik.gelu"(%x) {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[H:.*]] = "ik.cast"(%[[G]]) {to = f16}
// CHECK-NEXT: "ik.cast"(%[[H]]) {to = f32}
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<4x8xf32>):
    %3 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %4 = "ik.mul"(%x, %3) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %5 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %6 = "ik.constant"() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
    %7 = "ik.mul"(%x, %6) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %8 = "ik.erf"(%7) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %9 = "ik.add"(%5, %8) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %10 = "ik.mul"(%4, %9) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %11 = "ik.cast"(%10) {to = f16} : (tensor<4x8xf32>) -> tensor<4x8xf16>
    %12 = "ik.cast"(%11) {to = f32} : (tensor<4x8xf16>) -> tensor<4x8xf32>
    "func.return"(%12) : (tensor<4x8xf32>) -> ()
  }) {function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, sym_name = "main"} : () -> ()
}) : () -> ()

// -----

// f16 in, math upcast to f32, f16 out: one gelu in f16 (it computes in f32 inside).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.cast"
// CHECK: "ik.gelu"(%x) {{.*}} -> tensor<4x8xf16>
// CHECK-NOT: "ik.cast"
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<4x8xf16>):
    %u = "ik.cast"(%x) {to = f32} : (tensor<4x8xf16>) -> tensor<4x8xf32>
    %3 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %4 = "ik.mul"(%u, %3) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %5 = "ik.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %6 = "ik.constant"() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
    %7 = "ik.mul"(%u, %6) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %8 = "ik.erf"(%7) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %9 = "ik.add"(%5, %8) : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %10 = "ik.mul"(%4, %9) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %11 = "ik.cast"(%10) {to = f16} : (tensor<4x8xf32>) -> tensor<4x8xf16>
    "func.return"(%11) : (tensor<4x8xf16>) -> ()
  }) {function_type = (tensor<4x8xf16>) -> tensor<4x8xf16>, sym_name = "main"} : () -> ()
}) : () -> ()
