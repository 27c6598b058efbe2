// RUN: irkit opt %s | irkit opt - | filecheck %s
// RUN: irkit opt %s -o %t.mlir && irkit opt %t.mlir | filecheck %s
// RUN: not irkit opt %S/Inputs/bad.mlir 2>&1 | filecheck %s --check-prefix=ERR

// CHECK: "builtin.module"() ({
// CHECK: ^bb0(%x: tensor<?x?x8xbf16, ["B", "S"]>, %m: tensor<1x1x?x?xi1, ["S", "S"]>):
// CHECK: %[[S:[0-9]+]]:2 = "ik.split"(%x) {axis = 2 : i64, sizes = array<i64: 4, 4>}
// CHECK-SAME: loc("block.py":3:1)
// CHECK: "ik.mul"(%[[S]]#0, %[[S]]#1)
// CHECK-SAME: loc("attn/Mul"("block.py":4:0))
// CHECK: "ik.constant"() {value = dense<[1.5, -2.0]> : tensor<2xbf16>}
// CHECK: "ik.attention"
// CHECK-SAME: operandSegmentSizes = array<i64: 1, 1, 1, 1, 0>
// CHECK-SAME: loc(fused["a.py":1:0, "b"])
// CHECK: sym_name = "main"

// ERR: bad.mlir:4:{{[0-9]+}}: use of undefined value '%nope'
// ERR-NEXT: {{.*}}%nope{{.*}}
// ERR-NEXT: {{ *}}^

"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<?x?x8xbf16, ["B", "S"]>, %m: tensor<1x1x?x?xi1, ["S", "S"]>):
    %0:2 = "ik.split"(%x) {axis = 2 : i64, sizes = array<i64: 4, 4>} : (tensor<?x?x8xbf16, ["B", "S"]>) -> (tensor<?x?x4xbf16, ["B", "S"]>, tensor<?x?x4xbf16, ["B", "S"]>) loc("block.py":3:1)
    %1 = "ik.mul"(%0#0, %0#1) : (tensor<?x?x4xbf16, ["B", "S"]>, tensor<?x?x4xbf16, ["B", "S"]>) -> tensor<?x?x4xbf16, ["B", "S"]> loc("attn/Mul"("block.py":4:0))
    %2 = "ik.constant"() {value = dense<[1.5, -2.0]> : tensor<2xbf16>} : () -> tensor<2xbf16>
    %3 = "ik.reshape"(%1) {shape = ["B", 1 : i64, "S", 4 : i64]} : (tensor<?x?x4xbf16, ["B", "S"]>) -> tensor<?x1x?x4xbf16, ["B", "S"]>
    %4 = "ik.attention"(%3, %3, %3, %m) {causal = true, operandSegmentSizes = array<i64: 1, 1, 1, 1, 0>, scale = 0.5 : f64} : (tensor<?x1x?x4xbf16, ["B", "S"]>, tensor<?x1x?x4xbf16, ["B", "S"]>, tensor<?x1x?x4xbf16, ["B", "S"]>, tensor<1x1x?x?xi1, ["S", "S"]>) -> tensor<?x1x?x4xbf16, ["B", "S"]> loc(fused["a.py":1:0, "b"])
    "func.return"(%4, %2) : (tensor<?x1x?x4xbf16, ["B", "S"]>, tensor<2xbf16>) -> ()
  }) {function_type = (tensor<?x?x8xbf16, ["B", "S"]>, tensor<1x1x?x?xi1, ["S", "S"]>) -> (tensor<?x1x?x4xbf16, ["B", "S"]>, tensor<2xbf16>), sym_name = "main"} : () -> ()
}) : () -> ()
