// RUN: irkit opt %s -p 'mixed-precision{compute=bf16}' --check-numerics | filecheck %s
// RUN: irkit opt %s -p 'mixed-precision{compute=f16}' | filecheck %s --check-prefix=F16
// RUN: not irkit opt %s -p 'mixed-precision{compute=f8}' 2>&1 | filecheck %s --check-prefix=BAD

// The matmul runs in bf16 (the weight converted at compile time), the softmax stays f32.
// CHECK: "ik.constant"() {value = dense<{{.*}}> : tensor<4x4xbf16>}
// CHECK: "ik.cast"(%x) {to = bf16}
// CHECK: "ik.matmul"({{.*}}) : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// CHECK: "ik.cast"({{.*}}) {to = f32}
// CHECK: "ik.softmax"({{.*}}) {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// F16: "ik.matmul"({{.*}}) : (tensor<2x4xf16>, tensor<4x4xf16>) -> tensor<2x4xf16>
// BAD: irkit: error: pass 'mixed-precision': compute must be bf16 or f16, got 'f8'
"func.func"() ({
^bb0(%x: tensor<2x4xf32>):
  %w = "ik.constant"() {value = dense<[[0.5, -1.0, 0.25, 2.0], [1.5, 0.5, -0.75, 1.0], [-2.0, 0.125, 1.0, 0.5], [0.25, 1.0, -1.5, -0.5]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %0 = "ik.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = "ik.softmax"(%0) {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  "func.return"(%1) : (tensor<2x4xf32>) -> ()
}) {function_type = (tensor<2x4xf32>) -> tensor<2x4xf32>, sym_name = "mm"} : () -> ()
