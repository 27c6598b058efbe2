// RUN: irkit opt %s -p canonicalize,fuse-norm,cse,dce --split-input-file | filecheck %s
// RUN: irkit opt %s -p canonicalize,fuse-norm,cse,dce --split-input-file --check-rewrites --explain 2>&1 >/dev/null | filecheck %s --check-prefix=EXPLAIN
// RUN: irkit opt %s -p canonicalize,fuse-norm,cse,dce --split-input-file --check-rewrites --statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// Layer norm as ONNX opset < 17 writes it: mean, sub, pow 2, mean, add eps, sqrt, div, mul w, add b.
// CHECK-LABEL: "func.func"
// CHECK: "ik.layer_norm"(%x, %{{[0-9]+}}, %{{[0-9]+}}) {axis = 2 : i64, eps = 1.0e-05 : f64}
// CHECK-NOT: "ik.reduce_mean"
// CHECK-NOT: "ik.sqrt"
// STATS: fuse-norm
// STATS: 1 fused-norms
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.pow"(%1, %2) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %4 = "ik.reduce_mean"(%3) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %5 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%4, %5) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %7 = "ik.sqrt"(%6) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %8 = "ik.div"(%1, %7) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %9 = "ik.constant"() {value = dense<[1.0345584, 1.0821618, 1.0330437, 0.8696843, 1.0905356, 1.0446374, 0.9463047, 1.0581118, 1.0364572, 1.0294132, 1.0028422, 1.0546713, 0.9263546, 0.983709, 0.95178807, 1.0598847]> : tensor<16xf32>} : () -> tensor<16xf32>
  %10 = "ik.constant"() {value = dense<[0.003972211, -0.029245675, -0.07819085, -0.025719224, 0.0008142181, -0.02756029, 0.12940638, 0.10067243, -0.27111626, -0.18890132, -0.017477209, -0.042219043, 0.0213643, 0.021732192, 0.21178387, -0.111202076]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.mul"(%8, %9) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %12 = "ik.add"(%11, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%12) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_torch"} : () -> ()

// -----

// (x - mean) * rsqrt(var + eps) with var = mean(d * d).
// CHECK-LABEL: "func.func"
// CHECK: "ik.layer_norm"(%x,
// CHECK-NOT: "ik.rsqrt"
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.mul"(%1, %1) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %3 = "ik.reduce_mean"(%2) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %4 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.add"(%3, %4) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %6 = "ik.rsqrt"(%5) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %7 = "ik.mul"(%1, %6) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %8 = "ik.constant"() {value = dense<[0.9622395, 1.2042772, 1.0646703, 1.0663064, 0.94859934, 0.8351925, 1.0167465, 1.0109015, 0.8772648, 0.93167734, 0.99279565, 0.90552485, 0.990173, 1.0095483, 1.0035586, 0.94937086]> : tensor<16xf32>} : () -> tensor<16xf32>
  %9 = "ik.constant"() {value = dense<[0.059374806, 0.08911669, 0.03208483, -0.08182302, 0.07316523, -0.050144, 0.08791606, -0.10717874, 0.09144672, -0.0020063454, -0.12487489, -0.031389948, 0.005410228, 0.027279135, -0.09821881, -0.1107373]> : tensor<16xf32>} : () -> tensor<16xf32>
  %10 = "ik.mul"(%7, %8) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %11 = "ik.add"(%10, %9) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%11) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_rsqrt"} : () -> ()

// -----

// JAX: sum / N with the reduced axis re-inserted by a reshape, x - mean computed twice,
// weight and bias reshaped to [1, 1, 16].
// CHECK-LABEL: "func.func"
// CHECK: "ik.layer_norm"(%x, %{{[0-9]+}}, %{{[0-9]+}}) {axis = 2
// CHECK-NOT: "ik.reduce_sum"
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_sum"(%x) {axes = array<i64: 2>} : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  %1 = "ik.reshape"(%0) {shape = array<i64: 2, 4, 1>} : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %2 = "ik.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.div"(%1, %2) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %4 = "ik.sub"(%x, %3) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %5 = "ik.sub"(%x, %3) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %6 = "ik.mul"(%5, %5) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %7 = "ik.reduce_sum"(%6) {axes = array<i64: 2>} : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  %8 = "ik.reshape"(%7) {shape = array<i64: 2, 4, 1>} : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %9 = "ik.constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
  %10 = "ik.div"(%8, %9) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %11 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %12 = "ik.add"(%10, %11) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %13 = "ik.rsqrt"(%12) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %14 = "ik.mul"(%4, %13) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %15 = "ik.constant"() {value = dense<[1.0199585, 0.95332503, 1.0235505, 1.0759519, 0.8351213, 1.0254388, 1.1224647, 0.9702473, 0.91891855, 1.0752244, 1.0253446, 1.0895883, 0.9654784, 0.85181814, 0.98899895, 0.95541716]> : tensor<16xf32>} : () -> tensor<16xf32>
  %16 = "ik.constant"() {value = dense<[0.07753238, 0.019363284, -0.16308492, -0.119516306, 0.088378906, 0.067976505, -0.06402434, -0.000104879655, 0.044557355, 0.046840433, 0.08762422, 0.025648562, -0.009482834, -0.025884807, 0.10557428, -0.22508542]> : tensor<16xf32>} : () -> tensor<16xf32>
  %17 = "ik.reshape"(%15) {shape = array<i64: 1, 1, 16>} : (tensor<16xf32>) -> tensor<1x1x16xf32>
  %18 = "ik.reshape"(%16) {shape = array<i64: 1, 1, 16>} : (tensor<16xf32>) -> tensor<1x1x16xf32>
  %19 = "ik.mul"(%14, %17) : (tensor<2x4x16xf32>, tensor<1x1x16xf32>) -> tensor<2x4x16xf32>
  %20 = "ik.add"(%19, %18) : (tensor<2x4x16xf32>, tensor<1x1x16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%20) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_jax"} : () -> ()

// -----

// Variance as mean(x^2) - mean(x)^2.
// CHECK-LABEL: "func.func"
// CHECK: "ik.layer_norm"(%x,
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.mul"(%x, %x) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %3 = "ik.reduce_mean"(%2) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %4 = "ik.mul"(%0, %0) : (tensor<2x4x1xf32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %5 = "ik.sub"(%3, %4) : (tensor<2x4x1xf32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %6 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.add"(%5, %6) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %8 = "ik.sqrt"(%7) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %9 = "ik.div"(%1, %8) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %10 = "ik.constant"() {value = dense<[0.98613447, 1.0033, 0.8574651, 1.0332813, 0.9348719, 1.0862445, 0.98744076, 1.0669153, 1.1218843, 1.038293, 0.9124279, 0.84856814, 1.1753384, 0.9888708, 0.9311435, 1.0144258]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.constant"() {value = dense<[-0.019141134, 0.08521423, 0.0033928182, 0.0013749583, -0.071457975, 0.04695681, -0.10338667, 0.066588946, 0.15239376, -0.1524686, -0.24662292, 0.061687876, 0.25478977, -0.100092486, -0.12506957, 0.05889689]> : tensor<16xf32>} : () -> tensor<16xf32>
  %12 = "ik.mul"(%9, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %13 = "ik.add"(%12, %11) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%13) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_fast_var"} : () -> ()

// -----

// A float16 model normalising in float32: the casts stay around the fused op.
// CHECK-LABEL: "func.func"
// CHECK: %[[X:.*]] = "ik.cast"(%x) {to = f32}
// CHECK: %[[Y:.*]] = "ik.layer_norm"(%[[X]],
// CHECK: "ik.cast"(%[[Y]]) {to = f16}
"func.func"() ({
^bb0(%x: tensor<2x4x16xf16>):
  %0 = "ik.cast"(%x) {to = f32} : (tensor<2x4x16xf16>) -> tensor<2x4x16xf32>
  %1 = "ik.reduce_mean"(%0) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %2 = "ik.sub"(%0, %1) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %3 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.pow"(%2, %3) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %5 = "ik.reduce_mean"(%4) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %6 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.add"(%5, %6) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %8 = "ik.sqrt"(%7) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %9 = "ik.div"(%2, %8) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %10 = "ik.constant"() {value = dense<[0.9159278, 0.94939744, 0.96518826, 1.0532002, 0.95946974, 1.0277883, 0.98234665, 0.9155329, 0.9680174, 0.90496004, 1.0006515, 0.88761336, 0.8907106, 1.1456962, 0.9946816, 0.9946098]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.constant"() {value = dense<[0.05115364, -0.0420857, -0.022853537, 0.04251487, 0.028241584, -0.11592967, 0.08333426, -0.059043493, -0.1056079, -0.09004751, -0.039054535, 0.16273002, -0.11755359, 0.01600759, -0.21378243, -0.00015669332]> : tensor<16xf32>} : () -> tensor<16xf32>
  %12 = "ik.mul"(%9, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %13 = "ik.add"(%12, %11) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %14 = "ik.cast"(%13) {to = f16} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf16>
  "func.return"(%14) : (tensor<2x4x16xf16>) -> ()
}) {function_type = (tensor<2x4x16xf16>) -> tensor<2x4x16xf16>, sym_name = "ln_upcast"} : () -> ()

// -----

// No weight and no bias.
// CHECK-LABEL: "func.func"
// CHECK: "ik.layer_norm"(%x) {axis = 2
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.pow"(%1, %2) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %4 = "ik.reduce_mean"(%3) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %5 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%4, %5) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %7 = "ik.sqrt"(%6) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %8 = "ik.div"(%1, %7) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  "func.return"(%8) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_plain"} : () -> ()

// -----

// Llama's RMSNorm: upcast, x * rsqrt(mean(x^2) + eps), cast back, then weight *: the weight is
// absorbed in float32 and the cast moves after the fused op.
// CHECK-LABEL: "func.func"
// CHECK: %[[X:.*]] = "ik.cast"(%x) {to = f32}
// CHECK: %[[Y:.*]] = "ik.rms_norm"(%[[X]], %{{[0-9]+}}) {axis = 2 : i64, eps = 1.0e-06 : f64}
// CHECK: "ik.cast"(%[[Y]]) {to = f16}
// CHECK-NOT: "ik.rsqrt"
"func.func"() ({
^bb0(%x: tensor<2x4x16xf16>):
  %0 = "ik.cast"(%x) {to = f32} : (tensor<2x4x16xf16>) -> tensor<2x4x16xf32>
  %1 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %2 = "ik.pow"(%0, %1) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %3 = "ik.reduce_mean"(%2) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %4 = "ik.constant"() {value = dense<1.0e-06> : tensor<f32>} : () -> tensor<f32>
  %5 = "ik.add"(%3, %4) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %6 = "ik.rsqrt"(%5) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %7 = "ik.mul"(%0, %6) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %8 = "ik.cast"(%7) {to = f16} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf16>
  %9 = "ik.constant"() {value = dense<[1.09, 0.9766, 0.937, 1.023, 1.07, 1.066, 1.197, 1.0205, 0.941, 0.9873, 0.9927, 1.011, 0.997, 1.018, 0.833, 1.083]> : tensor<16xf16>} : () -> tensor<16xf16>
  %10 = "ik.mul"(%9, %8) : (tensor<16xf16>, tensor<2x4x16xf16>) -> tensor<2x4x16xf16>
  "func.return"(%10) : (tensor<2x4x16xf16>) -> ()
}) {function_type = (tensor<2x4x16xf16>) -> tensor<2x4x16xf16>, sym_name = "rms_llama"} : () -> ()

// -----

// T5LayerNorm in float32: weight * (x / sqrt(mean(x^2) + eps)).
// CHECK-LABEL: "func.func"
// CHECK: "ik.rms_norm"(%x, %{{[0-9]+}}) {axis = 2
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.pow"(%x, %0) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %2 = "ik.reduce_mean"(%1) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %3 = "ik.constant"() {value = dense<1.0e-06> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.add"(%2, %3) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %5 = "ik.sqrt"(%4) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %6 = "ik.div"(%x, %5) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %7 = "ik.constant"() {value = dense<[0.9425261, 0.8826841, 1.0637751, 1.1317326, 1.0493028, 1.0161159, 0.906778, 1.2871567, 1.0880258, 0.88607055, 0.92203623, 1.0086979, 0.8445269, 1.016863, 0.95409286, 1.122627]> : tensor<16xf32>} : () -> tensor<16xf32>
  %8 = "ik.mul"(%7, %6) : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%8) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "rms_t5"} : () -> ()

// -----

// Negative: the statistics are over axis 1, not the trailing axis, so this is not a layer norm
// (ik.layer_norm normalises dims [axis, rank)).
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.layer_norm"
// EXPLAIN: fuse-norm: 'ik.div' at unknown location not fused: the mean is not over trailing axes with keepdims
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x1x16xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x1x16xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.pow"(%1, %2) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %4 = "ik.reduce_mean"(%3) {axes = array<i64: 1>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x1x16xf32>
  %5 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%4, %5) : (tensor<2x1x16xf32>, tensor<f32>) -> tensor<2x1x16xf32>
  %7 = "ik.sqrt"(%6) : (tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %8 = "ik.div"(%1, %7) : (tensor<2x4x16xf32>, tensor<2x1x16xf32>) -> tensor<2x4x16xf32>
  %9 = "ik.constant"() {value = dense<[1.0962155, 0.72887146, 1.0041703, 0.83825326, 1.1109638, 1.0168105, 1.0548406, 0.8934875, 1.182843, 1.2020073, 0.8935229, 1.0372815, 0.93266976, 0.997643, 0.87343633, 1.1867145]> : tensor<16xf32>} : () -> tensor<16xf32>
  %10 = "ik.constant"() {value = dense<[-0.09691795, -0.029608382, 0.050148293, -0.064756066, -0.023931243, -0.056363985, -0.013346075, -0.11705426, -0.043798808, -0.020689292, -0.0333726, 0.0056689954, -0.029310223, 0.07532114, -0.032319594, -0.01366496]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.mul"(%8, %9) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %12 = "ik.add"(%11, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%12) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_wrong_axis"} : () -> ()

// -----

// Negative: the variance is of another tensor (y - mean), not x - mean.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.layer_norm"
// EXPLAIN: fuse-norm: 'ik.div' at unknown location not fused: the variance is not the mean of (x - mean)^2
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>, %y: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.sub"(%y, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %3 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %4 = "ik.pow"(%2, %3) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %5 = "ik.reduce_mean"(%4) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %6 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %7 = "ik.add"(%5, %6) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %8 = "ik.sqrt"(%7) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %9 = "ik.div"(%1, %8) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %10 = "ik.constant"() {value = dense<[0.93352187, 0.94734854, 0.8735507, 1.0518785, 0.8857482, 0.9254144, 1.0359244, 1.0402573, 0.95998853, 0.7980734, 1.0420513, 1.0259564, 0.8587619, 1.0770322, 0.92989004, 0.8873812]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.constant"() {value = dense<[0.009573071, -0.017847043, 0.0202624, -0.16057481, 0.181223, -0.06026586, -0.15396594, 0.06188422, -0.035480414, 0.03248585, -0.03396084, -0.005974036, 0.024577284, -0.074665286, 0.06787396, -0.04699001]> : tensor<16xf32>} : () -> tensor<16xf32>
  %12 = "ik.mul"(%9, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %13 = "ik.add"(%12, %11) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%13) : (tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>, sym_name = "ln_other_var"} : () -> ()

// -----

// Negative: x - mean is also returned, so it cannot disappear into a fused op.
// CHECK-LABEL: "func.func"
// CHECK-NOT: "ik.layer_norm"
// EXPLAIN: fuse-norm: 'ik.div' at unknown location not fused: 'ik.sub' inside the normalisation has a user outside it (func.return)
"func.func"() ({
^bb0(%x: tensor<2x4x16xf32>):
  %0 = "ik.reduce_mean"(%x) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %1 = "ik.sub"(%x, %0) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %2 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %3 = "ik.pow"(%1, %2) : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %4 = "ik.reduce_mean"(%3) {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  %5 = "ik.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %6 = "ik.add"(%4, %5) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %7 = "ik.sqrt"(%6) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %8 = "ik.div"(%1, %7) : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %9 = "ik.constant"() {value = dense<[0.9130313, 1.0077032, 1.0445042, 0.9770921, 0.913748, 1.0619786, 0.8239671, 0.8969136, 1.0039523, 0.86389405, 1.0027994, 0.9945137, 1.089874, 0.90852094, 0.93740934, 1.0333182]> : tensor<16xf32>} : () -> tensor<16xf32>
  %10 = "ik.constant"() {value = dense<[-0.24575636, 0.31000423, -0.06986507, -0.0729835, 0.08611275, -0.003983184, -0.17794286, 0.06269274, 0.085537784, -0.044994626, -0.028160036, 0.04859846, -0.090878025, 0.043838855, 0.01992985, -0.06749326]> : tensor<16xf32>} : () -> tensor<16xf32>
  %11 = "ik.mul"(%8, %9) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %12 = "ik.add"(%11, %10) : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  "func.return"(%12, %1) : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> ()
}) {function_type = (tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>), sym_name = "ln_leak"} : () -> ()
