// RUN: not irkit opt %s 2>&1 | filecheck %s
// RUN: irkit opt %S/Inputs/result_type_ok.mlir | filecheck %s --check-prefix=OK

// A function result type that disagrees with the returned value is reported at the op that
// produced the value (line 14 here), not at func.func or func.return.
// CHECK: result-type-at-producer.mlir:14:10: 'ik.mul' produces tensor<4xf32>, but @f declares result 0 as tensor<4xf16> in its function_type
// CHECK-NEXT: %1 = "ik.mul"(%0, %x)
// CHECK-NEXT: {{^ +}}^
// CHECK-NOT: internal error
// OK: "ik.mul"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
"func.func"() ({
^bb0(%x: tensor<4xf32>):
    %0 = "ik.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = "ik.mul"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%1) : (tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>) -> tensor<4xf16>, sym_name = "f"} : () -> ()
