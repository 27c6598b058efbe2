"""A representative sample of the ONNX backend node tests, through the importer and the interpreter.

Each case is one of ``onnx.backend.test.case.node.collect_testcases(None)``: a
model plus ONNX's own reference inputs and outputs (the framework is the
oracle).  The sample covers every converter family added for the node suite —
opsets 7 to 28, function-body expansion (nested bodies, attribute defaults, an
``If`` on a shape check), Resize, GridSample, pooling, ConvTranspose, unrolled
RNN/GRU/LSTM and Scan, the indexing, scan, sort, bit and quantisation ops, the
new integer dtypes — and the attention
cases whose fully masked rows once gave silent wrong answers.  Comparison is
the backend test's: rtol 1e-3 / atol 1e-7 unless the case says otherwise, equal
dtypes and shapes, NaNs equal.  Where the case feeds a shape operand (axes,
scales, K...) as a graph input, it is imported with ``constants=`` for it.

The full suite is measured by the conformance command; this file stays fast.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from irkit.frontends.onnx import import_onnx
from irkit.interp import run

SAMPLE = [
    # elementwise, trigonometric, integer dtypes
    "test_acos", "test_atanh_example", "test_round", "test_sign", "test_isinf_negative", "test_isnan",
    "test_mod_mixed_sign_float32", "test_mod_mixed_sign_int8", "test_mod_uint64", "test_bitshift_right_uint16",
    "test_bitshift_left_uint8", "test_bitwise_and_ui64_bcast_3v1d", "test_bitwise_not_3d", "test_clip_default_int8_min",
    "test_max_uint8", "test_min_int16", "test_add_uint8", "test_pow_types_float32_uint32",
    # reductions and arg reductions
    "test_reduce_l2_keep_dims_random", "test_reduce_log_sum_exp_do_not_keepdims_random", "test_reduce_sum_square_default_axes_keepdims_random",
    "test_reduce_l1_negative_axes_keep_dims_example", "test_reduce_max_empty_set", "test_reduce_log_sum_asc_axes",
    "test_argmax_negative_axis_keepdims_random_select_last_index", "test_argmin_no_keepdims_example_select_last_index",
    "test_hardmax_axis_0", "test_logsoftmax_axis_1",
    # indexing, scans, sorting
    "test_gather_elements_negative_indices", "test_gathernd_example_int32_batch_dim1", "test_scatter_elements_with_duplicate_indices",
    "test_scatternd_max", "test_scatter_with_axis", "test_cumsum_1d_reverse_exclusive", "test_cumsum_2d_negative_axis",
    "test_top_k_negative_axis", "test_top_k_smallest", "test_onehot_negative_indices", "test_compress_0",
    "test_tril_neg", "test_eyelike_with_dtype", "test_reversesequence_batch", "test_tensorscatter_circular",
    "test_einsum_transpose", "test_einsum_batch_diagonal", "test_einsum_batch_matmul", "test_einsum_sum", "test_range_int32_type_negative_delta",
    "test_tile_precomputed", "test_expand_dim_changed", "test_edge_pad", "test_reflect_pad", "test_wrap_pad",
    # windows, convolution, resize
    "test_maxpool_2d_ceil", "test_maxpool_with_argmax_2d_precomputed_strides", "test_col2im_pads", "test_maxpool_3d_dilations", "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_ceil", "test_lppool_2d_pads", "test_globalaveragepool", "test_conv_with_strides_and_asymmetric_padding",
    "test_convtranspose_pads", "test_convtranspose_output_shape", "test_convtranspose_3d", "test_convtranspose_group_2",
    "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside", "test_resize_downsample_scales_linear_antialias",
    "test_resize_tf_crop_and_resize_extrapolation_value", "test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "test_resize_downsample_sizes_nearest_not_larger", "test_upsample_nearest", "test_depthtospace_crd_mode_example",
    "test_spacetodepth_crd_mode_example", "test_lrn", "test_batchnorm_example_training_mode", "test_instancenorm_example",
    "test_layer_normalization_4d_axis1_expanded",
    # quantisation
    "test_quantizelinear_axis", "test_quantizelinear_blocked_asymmetric", "test_dequantizelinear_int16",
    "test_dynamicquantizelinear_max_adjusted", "test_matmulinteger", "test_qlinearmatmul_3D_int8_float32",
    # function bodies (expanded by onnx: losses, nested bodies, attribute defaults, If on a shape check)
    "test_nllloss_NCd1d2d3_sum_weight_high_ii", "test_sce_mean_weight_ii_4d_log_prob", "test_celu", "test_elu_default",
    "test_mvn", "test_shrink_soft", "test_center_crop_pad_crop_axes_chw", "test_affine_grid_2d_align_corners",
    "test_group_normalization_example", "test_layer_normalization_2d_axis0",
    # old opsets
    "test_upsample_nearest", "test_slice_start_out_of_bounds", "test_split_variable_parts_1d_opset13",
    # recurrences: RNN/GRU/LSTM and Scan unrolled over their static length (LinearAttention's body is a Scan)
    "test_simple_rnn_with_initial_bias", "test_gru_seq_length", "test_lstm_with_peepholes", "test_lstm_batchwise",
    "test_scan9_sum", "test_linear_attention_gated_delta_gqa", "test_linear_attention_prefill_with_past",
    # GridSample: every mode and padding rule
    "test_gridsample_bicubic_align_corners_0_additional_1", "test_gridsample_reflection_padding",
    "test_gridsample_border_padding", "test_gridsample_volumetric_nearest_align_corners_1",
    # attention (opset 23/24), including the fully masked rows that once gave silent wrong answers
    "test_attention_23_boolmask_fullymasked_row_nan_robustness",
    "test_attention_23_boolmask_fullymasked_row_nan_robustness_expanded",
    "test_attention_23_fullymasked_qk_matmul_output_mode3_zero_expanded",
    "test_attention_24_fullymasked_qk_matmul_output_mode3_zero", "test_attention_4d_with_qk_matmul_softcap",
    "test_attention_local_window", "test_rotary_embedding_interleaved",
]

_CASES: dict[str, Any] | None = None


def _cases() -> dict[str, Any]:
    global _CASES
    if _CASES is None:
        from onnx.backend.test.case.node import collect_testcases

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CASES = {c.name: c for c in collect_testcases(None)}
    return _CASES


def _compare(ref: np.ndarray, out: np.ndarray, rtol: float, atol: float, what: str) -> None:
    assert out.shape == ref.shape, f"{what}: shape {out.shape} != {ref.shape}"
    assert out.dtype == ref.dtype, f"{what}: dtype {out.dtype} != {ref.dtype}"
    if ref.dtype.kind == "f" or str(ref.dtype) == "bfloat16":
        np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(out, ref, err_msg=what)


def _import(case: Any, names: list[str], inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    try:
        return import_onnx(case.model), {}
    except Exception as e:
        if "computed at run time" not in str(e):
            raise
    frozen = {n: np.asarray(a) for i, (n, a) in enumerate(zip(names, inputs))
              if np.asarray(a).ndim <= 1 and (i > 0 or np.asarray(a).dtype.kind in "iu")}
    return import_onnx(case.model, constants=frozen), frozen


@pytest.mark.parametrize("name", sorted(set(SAMPLE)))
def test_node_case(name: str) -> None:
    cases = _cases()
    if name not in cases:
        pytest.skip(f"{name} is not in this onnx version's node suite")
    case = cases[name]
    init = {t.name for t in case.model.graph.initializer}
    names = [v.name for v in case.model.graph.input if v.name not in init]
    for inputs, outputs in case.data_sets:
        inputs = [np.asarray(a) for a in inputs]
        m, frozen = _import(case, names, inputs)
        with np.errstate(all="ignore"):
            got = run(m, [a for n, a in zip(names, inputs) if n not in frozen])
        assert len(got) == len(outputs)
        for i, (ref, out) in enumerate(zip(outputs, got)):
            _compare(np.asarray(ref), np.asarray(out), case.rtol, case.atol, f"{name} output {i}")


def test_fully_masked_rows_give_zeros_in_the_float64_oracle() -> None:
    """A fully masked attention row is 0 in ONNX's reference data; the f64 oracle must agree (not NaN)."""
    case = _cases()["test_attention_23_boolmask_fullymasked_row_nan_robustness"]
    inputs, outputs = case.data_sets[0]
    mask = np.asarray(inputs[3])
    assert not mask[0].any(), "row 0 of the sample's mask should be fully masked"
    m = import_onnx(case.model)
    got = run(m, list(inputs), float64=True)[0]
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, np.asarray(outputs[0]).astype(np.float64), rtol=1e-3, atol=1e-7)
    assert np.all(got[..., 0, :] == 0.0)
