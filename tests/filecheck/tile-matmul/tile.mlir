// RUN: irkit opt %s -p 'tile-matmul{target=tpu-v5e}' | filecheck %s --check-prefix=TPU
// RUN: irkit opt %s -p 'tile-matmul{target=h100}' | filecheck %s --check-prefix=GPU
// RUN: irkit opt %s -p 'tile-matmul{target=host-cpu}' | filecheck %s --check-prefix=CPU

// A GPT-2 FFN up-projection: the TPU gets a weight-stationary tile that is a
// multiple of its 128x128 MXU; the H100 a CTA tile; the CPU a BLIS-style cache block
// (k: a 16-wide f32 panel in half of the 32 KiB L1; n: the k x n block in half of the
// 512 KiB L2; bf16 is computed in f32 on a CPU without bf16 FMA, so f32 sizes).
// TPU: "ik.matmul"(%x, %w) {dataflow = "ws", tile = array<i64: {{[0-9]+}}, {{(128|256|384|512|640|768|896|1024|1536|2048|3072)}}, {{(128|256|384|512|640|768)}}>}
// GPU: "ik.matmul"(%x, %w) {tile = array<i64: {{(64|128|256)}}, {{(64|128|256)}}, {{(32|64)}}>}
// GPU-NOT: dataflow
// CPU: "ik.matmul"(%x, %w) {tile = array<i64: 64, 256, 256>}
"func.func"() ({
^bb0(%x: tensor<512x768xbf16>, %w: tensor<768x3072xbf16>):
  %0 = "ik.matmul"(%x, %w) : (tensor<512x768xbf16>, tensor<768x3072xbf16>) -> tensor<512x3072xbf16>
  "func.return"(%0) : (tensor<512x3072xbf16>) -> ()
}) {function_type = (tensor<512x768xbf16>, tensor<768x3072xbf16>) -> tensor<512x3072xbf16>, sym_name = "ffn_up"} : () -> ()
