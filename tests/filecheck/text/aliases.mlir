// The `aliases` function attribute (state: output i overwrites argument j) survives
// printing and parsing, and a bad alias is reported at the function's location.
// RUN: irkit opt %s | irkit opt - | filecheck %s
// RUN: irkit opt %s -p canonicalize,cse,dce | filecheck %s --check-prefix=PASS
// RUN: not irkit opt %S/Inputs/bad_aliases.mlir 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not irkit opt %S/Inputs/bad_alias_type.mlir 2>&1 | filecheck %s --check-prefix=TYPE

// CHECK: ^bb0(%x: tensor<1x4xf32>, %cache: tensor<8x4xf32>, %pos: tensor<2xi32>):
// CHECK: %[[NEW:[0-9]+]] = "ik.dynamic_update_slice"(%cache, %{{[0-9]+}}, %pos)
// CHECK: "func.return"(%{{[0-9]+}}, %[[NEW]])
// CHECK-SAME: -> ()
// CHECK-NEXT: }) {function_type = {{.*}}, sym_name = "main", aliases = [[1, 1]]}
// CHECK-NOT: cache_pairs

// PASS: sym_name = "main", aliases = [[1, 1]]}

// ERR: irkit: error: verification failed: at step.py:3:1: @main: 'aliases' pair [1, 3]: argument 3 is out of range (the function has 3 arguments)
// ERR-NOT: Traceback

// TYPE: irkit: error: verification failed: at step.py:3:1: @main: 'aliases' pair [0, 1]: output 0 has type tensor<4xf32> but argument 1 ('cache') has type tensor<8x4xf32>; an alias needs the same type

"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<1x4xf32>, %cache: tensor<8x4xf32>, %pos: tensor<2xi32>):
    %0 = "ik.constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
    %1 = "ik.mul"(%x, %0) : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
    %2 = "ik.dynamic_update_slice"(%cache, %1, %pos) : (tensor<8x4xf32>, tensor<1x4xf32>, tensor<2xi32>) -> tensor<8x4xf32>
    %3 = "ik.reduce_sum"(%2) {axes = array<i64: 0>} : (tensor<8x4xf32>) -> tensor<4xf32>
    "func.return"(%3, %2) : (tensor<4xf32>, tensor<8x4xf32>) -> ()
  }) {function_type = (tensor<1x4xf32>, tensor<8x4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<8x4xf32>), sym_name = "main", aliases = [[1, 1]]} : () -> () loc("step.py":3:1)
}) : () -> ()
