// ik.bitcast and the float8 element types print and parse back; canonicalize/cse/dce keep a
// rounding float8 cast pair and do not merge casts that differ only in `saturate`; a bitcast
// whose last dim does not match the width ratio is one error line.
// RUN: irkit opt %s | irkit opt - | filecheck %s
// RUN: irkit opt %s -p canonicalize,cse,dce | filecheck %s --check-prefix=PASS
// RUN: not irkit opt %S/Inputs/bad_bitcast.mlir 2>&1 | filecheck %s --check-prefix=ERR

// CHECK: "ik.bitcast"(%x) {dtype = ui8} : (tensor<2xf32>) -> tensor<2x4xui8>
// CHECK: "ik.bitcast"(%{{[0-9]+}}) {dtype = f32} : (tensor<2x4xui8>) -> tensor<2xf32>
// CHECK: "ik.cast"(%x) {to = f8E4M3FN} : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
// CHECK: "ik.cast"(%x) {saturate = true, to = f8E4M3FN} : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
// CHECK: dense<[0x7F, 1.5]> : tensor<2xf8E4M3FN>
// CHECK: "ik.cast"(%y) {to = f32} : (tensor<2xf8E5M2FNUZ>) -> tensor<2xf32>

// PASS: "ik.cast"(%x) {to = f8E4M3FN}
// PASS: "ik.cast"(%x) {saturate = true, to = f8E4M3FN}
// PASS: "ik.cast"(%{{[0-9]+}}) {to = f32} : (tensor<2xf8E4M3FN>) -> tensor<2xf32>
// PASS: "ik.cast"(%{{[0-9]+}}) {to = f32} : (tensor<2xf8E4M3FN>) -> tensor<2xf32>
// PASS-NOT: "ik.bitcast"

// ERR: irkit: error: {{.*}}pack.py:7:3{{.*}}bitcast f16 -> f32 packs 2 elements into one: the last dim must be 2, got 3
// ERR-NOT: Traceback

"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<2xf32>, %y: tensor<2xf8E5M2FNUZ>):
    %0 = "ik.bitcast"(%x) {dtype = ui8} : (tensor<2xf32>) -> tensor<2x4xui8>
    %1 = "ik.bitcast"(%0) {dtype = f32} : (tensor<2x4xui8>) -> tensor<2xf32>
    %2 = "ik.cast"(%x) {to = f8e4m3fn} : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
    %3 = "ik.cast"(%x) {saturate = true, to = f8E4M3FN} : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
    %4 = "ik.constant"() {value = dense<[0x7F, 1.5]> : tensor<2xf8E4M3FN>} : () -> tensor<2xf8E4M3FN>
    %5 = "ik.cast"(%2) {to = f32} : (tensor<2xf8E4M3FN>) -> tensor<2xf32>
    %6 = "ik.cast"(%3) {to = f32} : (tensor<2xf8E4M3FN>) -> tensor<2xf32>
    %7 = "ik.cast"(%y) {to = f32} : (tensor<2xf8E5M2FNUZ>) -> tensor<2xf32>
    %8 = "ik.sub"(%5, %6) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%8, %4, %7) : (tensor<2xf32>, tensor<2xf8E4M3FN>, tensor<2xf32>) -> ()
  }) {function_type = (tensor<2xf32>, tensor<2xf8E5M2FNUZ>) -> (tensor<2xf32>, tensor<2xf8E4M3FN>, tensor<2xf32>), sym_name = "main"} : () -> ()
}) : () -> ()
