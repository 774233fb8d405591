"""Factored (exact) per-example gradient statistics of Dense and Conv2D kernels.

For a layer z = a W (+ b), the per-example kernel gradient is g_i = a_iᵀ δ_i, where a_i is the
layer input and δ_i = ∂ loss_i / ∂ z_i, both captured in the training backward pass. This module
owns the pure math that turns (a, δ) into `stats.GradStats` without materialising g_i when it
can avoid it (DESIGN.md section 5):

- Dense (one position per example): ||g_i||² = ||a_i||² ||δ_i||², <g_i, g_j> = (a_i·a_j)(δ_i·δ_j);
  per-class sums either from that Gram matrix (cost n²(K+O)) or as A_cᵀ Δ_c (cost n·K·O),
  whichever is cheaper.
- Positions (Conv2D via image patches, Dense on sequences): g_i = P_iᵀ Δ_i with P_i [L, K] patches
  and Δ_i [L, O]. Norms either from the materialised per-example gradients (cost n·L·K·O, chunked)
  or from the patch Gram Σ_pq (P_i P_iᵀ)_pq (Δ_i Δ_iᵀ)_pq (cost n·L²(K+O)); per-class sums as
  segment sums of the per-example gradients or as masked filter gradients P_cᵀ Δ_c.

All functions take the *global* batch (the engine gathers replicas first) and return float32.
"""

from typing import Optional, Sequence

import tensorflow as tf

from extreme_mem.pergrad import stats


def prefers_gram(n: Optional[int], k: int, o: int) -> bool:
    """True when the n×n Gram route is cheaper than per-class A_cᵀΔ_c for a Dense kernel [k, o]."""
    return n is not None and n * (k + o) <= k * o


def prefers_patch_gram(length: int, k: int, o: int) -> bool:
    """True when per-example norms via the patch Gram (L²(K+O)) beat materialising P_iᵀΔ_i (L·K·O)."""
    return length * (k + o) < k * o


def _partitioned_class_sums(p: tf.Tensor, d: tf.Tensor, labels: tf.Tensor, spec: stats.ClassSpec):
    """Per-class kernel gradients P_cᵀ Δ_c (masked filter gradients), one matmul per class.

    Args:
      p: [n, L, K] layer inputs (patches).
      d: [n, L, O] output gradients.
      labels: [n] int.
      spec: which classes.

    Returns:
      list of [K, O], one per class in `spec.classes`.
    """
    seg, num = spec.segments(labels)
    k, o = p.shape[-1], d.shape[-1]
    parts_p = tf.dynamic_partition(p, seg, num)
    parts_d = tf.dynamic_partition(d, seg, num)
    return [
        tf.matmul(tf.reshape(parts_p[c], [-1, k]), tf.reshape(parts_d[c], [-1, o]), transpose_a=True)
        for c in range(len(spec.classes))
    ]


def _stats_from_partition(p, d, labels, spec, sq_norms) -> stats.GradStats:
    sums = _partitioned_class_sums(p, d, labels, spec)
    if spec.is_all:
        total = tf.add_n(sums)
    else:
        k, o = p.shape[-1], d.shape[-1]
        total = tf.matmul(tf.reshape(p, [-1, k]), tf.reshape(d, [-1, o]), transpose_a=True)
    return stats.GradStats(
        sq_norms=sq_norms,
        class_sum_sq_norms=spec.scatter(tf.stack([tf.reduce_sum(tf.square(s)) for s in sums])),
        class_counts=spec.counts(labels),
        total_sum_sq_norm=tf.reduce_sum(tf.square(total)),
    )


def dense_kernel_stats(
    a: tf.Tensor,
    d: tf.Tensor,
    labels: tf.Tensor,
    spec: stats.ClassSpec,
    compute_gram: bool = False,
    n_hint: Optional[int] = None,
) -> stats.GradStats:
    """Statistics of g_i = a_iᵀ δ_i for a Dense kernel.

    Args:
      a: [n, K] layer inputs.
      d: [n, O] gradients of the summed loss w.r.t. the layer's pre-activation outputs.
      labels: [n] int.
      spec: which classes get per-class statistics.
      compute_gram: return the [n, n] Gram matrix.
      n_hint: batch size for the cost model when `a` has no static batch dimension.

    Returns:
      `GradStats` of the kernel.
    """
    a, d = tf.cast(a, tf.float32), tf.cast(d, tf.float32)
    sq_norms = tf.reduce_sum(tf.square(a), axis=1) * tf.reduce_sum(tf.square(d), axis=1)
    n = a.shape[0] if a.shape[0] is not None else n_hint
    if compute_gram or prefers_gram(n, a.shape[1], d.shape[1]):
        gram = stats.gram_of(a) * stats.gram_of(d)
        return stats.from_gram(gram, labels, spec, sq_norms=sq_norms, keep_gram=compute_gram)
    return _stats_from_partition(a[:, tf.newaxis, :], d[:, tf.newaxis, :], labels, spec, sq_norms)


def positional_kernel_stats(
    p: tf.Tensor,
    d: tf.Tensor,
    labels: tf.Tensor,
    spec: stats.ClassSpec,
    compute_gram: bool = False,
    chunk_size: int = 64,
) -> stats.GradStats:
    """Statistics of g_i = P_iᵀ Δ_i, summed over L positions (conv patches, sequence steps).

    Args:
      p: [n, L, K] inputs per position (image patches for a convolution).
      d: [n, L, O] output gradients per position.
      labels: [n] int.
      spec: which classes.
      compute_gram: return the [n, n] Gram matrix (materialises g_i: memory n·K·O).
      chunk_size: examples per chunk when materialising g_i without a Gram.

    Returns:
      `GradStats` of the kernel.
    """
    p, d = tf.cast(p, tf.float32), tf.cast(d, tf.float32)
    length, k, o = p.shape[1], p.shape[2], d.shape[2]
    if length == 1:
        return dense_kernel_stats(p[:, 0], d[:, 0], labels, spec, compute_gram)
    if not compute_gram and length is not None and prefers_patch_gram(length, k, o):
        pp = tf.matmul(p, p, transpose_b=True)  # [n, L, L]
        dd = tf.matmul(d, d, transpose_b=True)
        sq_norms = tf.maximum(tf.reduce_sum(pp * dd, axis=[1, 2]), 0.0)
        return _stats_from_partition(p, d, labels, spec, sq_norms)
    n = p.shape[0]
    if compute_gram or n is None or n <= chunk_size:
        bounds = [(None, None)]
    else:
        bounds = [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]
    chunks = []
    for s, e in bounds:
        # Per-example gradients, transposed ([chunk, O, K]: the faster matmul on CPU); the
        # statistics do not depend on the order of a gradient's coordinates.
        g = tf.matmul(d[s:e], p[s:e], transpose_a=True)
        chunks.append(tf.reshape(g, [-1, k * o]))
    return stats.from_vector_chunks(chunks, labels, spec, compute_gram)


def flatten_positions(t: tf.Tensor) -> tf.Tensor:
    """[n, *positions, F] -> [n, L, F], keeping L static when the position axes are."""
    middle = t.shape[1:-1]
    length = middle.num_elements() if middle.is_fully_defined() else -1
    return tf.reshape(t, [tf.shape(t)[0], length, t.shape[-1]])


def _conv_geometry(size: int, k: int, stride: int, dilation: int, padding: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) of one spatial axis, TensorFlow semantics."""
    span = (k - 1) * dilation + 1
    if padding.lower() == 'same':
        out = -(-size // stride)
        total = max((out - 1) * stride + span - size, 0)
        return out, total // 2, total - total // 2
    return -(-(size - span + 1) // stride), 0, 0


def conv2d_patches(
    x: tf.Tensor,
    kernel_size: Sequence[int],
    strides: Sequence[int],
    dilation_rate: Sequence[int],
    padding: str,
) -> tf.Tensor:
    """Image patches a Conv2D multiplies with its kernel, flattened as the kernel is.

    Stride-1 convolutions use kh·kw shifted slices of the padded input (about 3× faster than
    `tf.image.extract_patches` on CPU); strided ones use `tf.image.extract_patches`.

    Args:
      x: [n, H, W, C_in] layer input (channels_last, static H, W, C_in).
      kernel_size: (kh, kw).
      strides: (sh, sw).
      dilation_rate: (dh, dw).
      padding: 'valid' or 'same' (TensorFlow semantics, as Keras uses).

    Returns:
      [n, H'·W', kh·kw·C_in] patches; row-major (kh, kw, C_in) matches `kernel.reshape([-1, C_out])`.
    """
    kh, kw = kernel_size
    (sh, sw), (dh, dw) = strides, dilation_rate
    if (sh, sw) != (1, 1):
        patches = tf.image.extract_patches(
            x, sizes=[1, kh, kw, 1], strides=[1, sh, sw, 1], rates=[1, dh, dw, 1], padding=padding.upper()
        )
        return flatten_positions(patches)
    out_h, top, bottom = _conv_geometry(x.shape[1], kh, 1, dh, padding)
    out_w, left, right = _conv_geometry(x.shape[2], kw, 1, dw, padding)
    if top or bottom or left or right:
        x = tf.pad(x, [[0, 0], [top, bottom], [left, right], [0, 0]])
    shifted = [x[:, i * dh : i * dh + out_h, j * dw : j * dw + out_w, :] for i in range(kh) for j in range(kw)]
    return flatten_positions(tf.concat(shifted, axis=-1))


def conv2d_kernel_stats(
    x: tf.Tensor,
    d: tf.Tensor,
    kernel_size: Sequence[int],
    strides: Sequence[int],
    dilation_rate: Sequence[int],
    padding: str,
    labels: tf.Tensor,
    spec: stats.ClassSpec,
    compute_gram: bool = False,
    chunk_size: int = 64,
) -> stats.GradStats:
    """Statistics of the per-example kernel gradients of a Conv2D layer (channels_last, groups=1).

    Args:
      x: [n, H, W, C_in] layer input.
      d: [n, H', W', C_out] gradients of the summed loss w.r.t. the pre-activation output.
      kernel_size, strides, dilation_rate, padding: the layer's configuration.
      labels: [n] int.
      spec: which classes.
      compute_gram: return the [n, n] Gram matrix.
      chunk_size: examples per chunk when materialising per-example gradients.

    Returns:
      `GradStats` of the kernel.
    """
    x, d = tf.cast(x, tf.float32), tf.cast(d, tf.float32)
    p = conv2d_patches(x, kernel_size, strides, dilation_rate, padding)
    d = flatten_positions(d)
    return positional_kernel_stats(p, d, labels, spec, compute_gram, chunk_size)


def bias_stats(
    d: tf.Tensor, labels: tf.Tensor, spec: stats.ClassSpec, compute_gram: bool = False
) -> stats.GradStats:
    """Statistics of a bias gradient: Σ over positions of δ_i.

    Args:
      d: [n, ..., O] output gradients.
      labels: [n] int.
      spec: which classes.
      compute_gram: return the [n, n] Gram matrix.

    Returns:
      `GradStats` of the bias.
    """
    d = tf.cast(d, tf.float32)
    if d.shape.rank > 2:
        d = tf.reduce_sum(d, axis=list(range(1, d.shape.rank - 1)))
    return stats.from_vector_chunks([d], labels, spec, compute_gram)
