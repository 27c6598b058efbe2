// RUN: irkit opt %s -p canonicalize,fuse-attention,cse,dce --split-input-file | filecheck %s

// Scale as scores * (1/sqrt(d)): one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "scores_mul"} : () -> ()

// -----

// Scale as scores / sqrt(d), as GPT-2 and BERT write it: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<2.828427> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.div"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "scores_div"} : () -> ()

// -----

// Scale as Q * scale before QKᵀ: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %2 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.matmul"(%1, %2) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "q_mul"} : () -> ()

// -----

// Scale as Q / sqrt(d): one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.constant"() {value = dense<2.828427> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.div"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %2 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.matmul"(%1, %2) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "q_div"} : () -> ()

// -----

// Scale as K * scale before its transpose: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%k, %0) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %2 = "ik.transpose"(%1) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.matmul"(%q, %2) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "k_mul"} : () -> ()

// -----

// Scale as Kᵀ * scale after the transpose: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.constant"() {value = dense<0.35355338> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.mul"(%0, %1) : (tensor<2x4x8x6xf32>, tensor<f32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.matmul"(%q, %2) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "kt_mul"} : () -> ()

// -----

// Scale as sqrt(scale) on Q and on Kᵀ (torch's ONNX export of SDPA): one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.constant"() {value = dense<0.59460354> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  %2 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %3 = "ik.constant"() {value = dense<0.59460354> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.mul"(%2, %3) : (tensor<2x4x8x6xf32>, tensor<f32>) -> tensor<2x4x8x6xf32>
  %5 = "ik.matmul"(%1, %4) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.softmax"(%5) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %7 = "ik.matmul"(%6, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%7) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "split_sqrt"} : () -> ()

// -----

// Scale as a tensor<1x1x1x1> splat constant: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<0.35355338> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
  %3 = "ik.mul"(%1, %2) : (tensor<2x4x6x6xf32>, tensor<1x1x1x1xf32>) -> tensor<2x4x6x6xf32>
  %4 = "ik.softmax"(%3) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.matmul"(%4, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%5) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "tensor_const"} : () -> ()

// -----

// Scale as scores * rsqrt(8.0), folded first: one scale attribute.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 0.3535533{{[0-9]*}} : f64}
// CHECK-NOT: "ik.mul"
// CHECK-NOT: "ik.div"
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.constant"() {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.rsqrt"(%2) : (tensor<f32>) -> tensor<f32>
  %4 = "ik.mul"(%1, %3) : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %5 = "ik.softmax"(%4) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %6 = "ik.matmul"(%5, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%6) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "rsqrt_expr"} : () -> ()

// -----

// No scale at all (T5): scale = 1.0.
// CHECK-LABEL: "func.func"
// CHECK: "ik.attention"(%q, %k, %v) {scale = 1.0 : f64}
"func.func"() ({
^bb0(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x6x8xf32>, %v: tensor<2x4x6x8xf32>):
  %0 = "ik.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %1 = "ik.matmul"(%q, %0) : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %2 = "ik.softmax"(%1) {axis = -1 : i64} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %3 = "ik.matmul"(%2, %v) : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  "func.return"(%3) : (tensor<2x4x6x8xf32>) -> ()
}) {function_type = (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>, sym_name = "unscaled"} : () -> ()
