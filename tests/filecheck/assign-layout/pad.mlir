// RUN: irkit opt %s -p 'assign-layout{target=tpu-v5e}' --check-numerics --split-input-file | filecheck %s --check-prefix=TPU
// RUN: irkit opt %s -p 'assign-layout{target=h100}' --check-numerics --split-input-file | filecheck %s --check-prefix=GPU

// K=100, N=200 are not multiples of the TPU's 128 lanes: pad, multiply, slice back.
// TPU-LABEL: "func.func"
// TPU: "ik.pad"(%x) {pads = array<i64: 0, 0, 0, 28>
// TPU: "ik.matmul"({{.*}}) {layout = "kn"} : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
// TPU: "ik.slice"({{.*}}limit = array<i64: 8, 200>
// On the GPU (f32: 4-element vectors) 100 and 200 are already aligned: only the layout is chosen.
// GPU-LABEL: "func.func"
// GPU-NOT: "ik.pad"
// GPU: "ik.matmul"(%x, %w) {layout = "nk"} : (tensor<8x100xf32>, tensor<100x200xf32>) -> tensor<8x200xf32>
"func.func"() ({
^bb0(%x: tensor<8x100xf32>, %w: tensor<100x200xf32>):
  %0 = "ik.matmul"(%x, %w) : (tensor<8x100xf32>, tensor<100x200xf32>) -> tensor<8x200xf32>
  "func.return"(%0) : (tensor<8x200xf32>) -> ()
}) {function_type = (tensor<8x100xf32>, tensor<100x200xf32>) -> tensor<8x200xf32>, sym_name = "odd"} : () -> ()

// -----

// Head dim 64 fills half of a 128-wide MXU: pad Q/K/V's head dim, slice the output.
// TPU-LABEL: "func.func"
// TPU-COUNT-3: "ik.pad"
// TPU: "ik.attention"({{.*}}) {causal = true, scale = 0.125 : f64} : (tensor<1x2x16x128xf32>
// TPU: "ik.slice"
// GPU-LABEL: "func.func"
// GPU-NOT: "ik.pad"
"func.func"() ({
^bb0(%q: tensor<1x2x16x64xf32>, %k: tensor<1x2x16x64xf32>, %v: tensor<1x2x16x64xf32>):
  %0 = "ik.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f64} : (tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32>
  "func.return"(%0) : (tensor<1x2x16x64xf32>) -> ()
}) {function_type = (tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32>, sym_name = "attn"} : () -> ()

// -----

// Negative: a dim below min-dim (8) is left alone even on the TPU.
// TPU-LABEL: "func.func"
// TPU-NOT: "ik.pad"
"func.func"() ({
^bb0(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>):
  %0 = "ik.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  "func.return"(%0) : (tensor<4x8xf32>) -> ()
}) {function_type = (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>, sym_name = "tiny"} : () -> ()
