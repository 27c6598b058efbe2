// RUN: not irkit opt %s -p 'tile-matmul{target=tpu-v9}' 2>&1 | filecheck %s --check-prefix=SPEC
// RUN: not irkit opt %s -p 'assign-layout{target=nowhere/chip.toml}' 2>&1 | filecheck %s --check-prefix=FILE
// RUN: irkit opt %s -p 'tile-matmul{target=tpu-v6e}' | filecheck %s --check-prefix=OK

// A hardware option names a known spec or a TOML file; anything else is one line that
// names the pass, the option and the specs, before the input is read.
// SPEC: irkit: error: pass 'tile-matmul': option 'target=tpu-v9': unknown hardware 'tpu-v9'; use one of: {{.*}}tpu-v5e{{.*}}, or a path to a .toml file
// SPEC-NOT: internal error
// SPEC-NOT: Traceback
// FILE: irkit: error: pass 'assign-layout': option 'target=nowhere/chip.toml': nowhere/chip.toml: no such hardware description file
// OK: "ik.matmul"(%x, %w) {dataflow = "ws", tile = array<i64:
"func.func"() ({
^bb0(%x: tensor<256x512xbf16>, %w: tensor<512x1024xbf16>):
  %0 = "ik.matmul"(%x, %w) : (tensor<256x512xbf16>, tensor<512x1024xbf16>) -> tensor<256x1024xbf16>
  "func.return"(%0) : (tensor<256x1024xbf16>) -> ()
}) {function_type = (tensor<256x512xbf16>, tensor<512x1024xbf16>) -> tensor<256x1024xbf16>, sym_name = "mm"} : () -> ()
