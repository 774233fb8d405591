"""Covariance alignment between data and first-layer weights (Maennel et al., NeurIPS 2020, sec. 2).

Pure numpy functions on arrays:

- `patch_covariance`: Σ_x of the k×k×C patches a conv layer sees (sec. 2.1, A.6);
- `filter_matrix` / `filter_covariance`: the filters of a conv or dense kernel as vectors and
  their covariance Σ_w (sec. 2.2);
- `misalignment`: M(A, B) of Definition 2 in closed form (Proposition 2.7), and
  `basis_misalignment` / `random_basis_misalignment`: the same sum taken over a given orthonormal
  basis, with Haar-random bases as the control of Fig. 2;
- `transfer_function`: f(σ_i) = sqrt(v_iᵀ Σ_w v_i) of Definition 3 (Fig. 4);
- `gaussian_inputs`: the synthetic N(0, diag(0.1, 0.2, ..., 3.0)) inputs of Fig. 4 (left);
- `eigenvector_matches`: the Σ_w / Σ_x eigenvector pairs shown in Fig. 3;
- `sample_filters`: conv filters drawn from N(0, Σ_w) (the "covariance" init of Fig. 5);
- `eigen_filters`: filters τ_i e_i from the top eigenvectors of an input covariance (sec. 2.5,
  Table 1; appendix E.3).

Conventions: a conv kernel has the Keras shape [kh, kw, C_in, C_out]; filter j is
`kernel[..., j].reshape(-1)`, i.e. flattened in (kh, kw, C_in) order, the same order
`patches` flattens image patches, so ⟨filter, patch⟩ is the pre-activation.

Definition 2 subtracts d, so perfect alignment gives M = 0; appendix A.6 writes "− 1" instead.
These functions follow Definition 2 (and Proposition 2), so values differ from A.6 by d − 1.
"""

from typing import Optional, Sequence, Tuple, Union

import numpy as np

Seed = Union[None, int, Sequence[int], np.random.Generator]
PADDINGS = ('valid', 'same')


def _rng(seed: Seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_square(name: str, m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f'{name} must be a square matrix, got shape {m.shape}.')
    return m


def _sym_eigh(m: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and unit eigenvectors (columns) of the symmetric part of `m`."""
    values, vectors = np.linalg.eigh((m + m.T) / 2)
    order = np.argsort(values)[::-1]
    return values[order], vectors[:, order]


# ---- patches and covariances -------------------------------------------------------------------


def patches(images: np.ndarray, kernel_size: int = 3, stride: int = 1, padding: str = 'valid') -> np.ndarray:
    """All k×k×C patches of `images`, flattened in (kh, kw, C) order.

    Args:
      images: [n, H, W, C] (or [n, H, W]: one channel).
      kernel_size: k.
      stride: patch stride (the conv stride).
      padding: 'valid' (patches inside the image) or 'same' (zero padding as Keras `same`).

    Returns:
      [n * H' * W', k * k * C] float64.
    """
    x = np.asarray(images, dtype=np.float64)
    if x.ndim == 3:
        x = x[..., np.newaxis]
    if x.ndim != 4:
        raise ValueError(f'patches needs [n, H, W, C] images, got shape {x.shape}.')
    if padding not in PADDINGS:
        raise ValueError(f'Unknown padding {padding!r}; valid: {list(PADDINGS)}.')
    k = int(kernel_size)
    if k < 1 or stride < 1:
        raise ValueError(f'kernel_size and stride must be >= 1, got {kernel_size}, {stride}.')
    if padding == 'same':
        h, w = x.shape[1:3]
        out_h, out_w = -(-h // stride), -(-w // stride)
        pad_h = max((out_h - 1) * stride + k - h, 0)
        pad_w = max((out_w - 1) * stride + k - w, 0)
        x = np.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)))
    if x.shape[1] < k or x.shape[2] < k:
        raise ValueError(f'Images {x.shape[1:3]} are smaller than the {k}x{k} patch.')
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))  # [n, H', W', C, k, k]
    windows = windows[:, ::stride, ::stride]
    windows = np.moveaxis(windows, 3, -1)  # [n, H', W', k, k, C]
    return windows.reshape(-1, k * k * x.shape[-1])


def covariance(vectors: np.ndarray, center: bool = True) -> np.ndarray:
    """Covariance (1/N normalisation) of the rows of `vectors` [N, d]; uncentred: E[v vᵀ]."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 1:
        raise ValueError(f'covariance needs [N >= 1, d] vectors, got shape {v.shape}.')
    if center:
        v = v - v.mean(axis=0, keepdims=True)
    return v.T @ v / v.shape[0]


def patch_covariance(
    images: np.ndarray,
    kernel_size: int = 3,
    stride: int = 1,
    padding: str = 'valid',
    chunk: int = 512,
) -> np.ndarray:
    """Σ_x: covariance of the k×k×C patches of `images` (Maennel et al. sec. 2.1, A.6).

    Accumulates sums over chunks of images, so the patch matrix is never held at once.

    Args:
      images: [n, H, W, C].
      kernel_size, stride, padding: the conv layer's geometry (see `patches`).
      chunk: images per chunk.

    Returns:
      [k*k*C, k*k*C] float64, centred, 1/N normalised.
    """
    x = np.asarray(images)
    if len(x) == 0:
        raise ValueError('patch_covariance needs at least one image.')
    total, s, ss = 0, None, None
    for start in range(0, len(x), chunk):
        p = patches(x[start:start + chunk], kernel_size, stride, padding)
        if s is None:
            s, ss = np.zeros(p.shape[1]), np.zeros((p.shape[1], p.shape[1]))
        total += len(p)
        s += p.sum(axis=0)
        ss += p.T @ p
    mean = s / total
    cov = ss / total - np.outer(mean, mean)
    return (cov + cov.T) / 2


def filter_matrix(kernel: np.ndarray) -> np.ndarray:
    """Filters of a kernel as rows: [kh, kw, C_in, C_out] or dense [d, units] -> [C_out, d]."""
    w = np.asarray(kernel, dtype=np.float64)
    if w.ndim < 2:
        raise ValueError(f'A kernel needs >= 2 dimensions (inputs..., outputs), got shape {w.shape}.')
    return w.reshape(-1, w.shape[-1]).T


def filter_covariance(kernel: np.ndarray, center: bool = True) -> np.ndarray:
    """Σ_w: covariance of the filters (rows of `filter_matrix`) of one layer (sec. 2.2).

    Args:
      kernel: conv [kh, kw, C_in, C_out] or dense [d, units].
      center: subtract the mean filter (Σ_w of eq. 2); False gives E[w wᵀ].

    Returns:
      [d, d] float64.
    """
    return covariance(filter_matrix(kernel), center=center)


# ---- misalignment (Definition 2) ----------------------------------------------------------------


def eigenspaces(a: np.ndarray, rtol: float = 1e-8) -> list:
    """Orthonormal bases of the eigenspaces of symmetric `a`, largest eigenvalue first.

    Eigenvalues closer than `rtol * max|λ|` are one eigenspace.

    Returns:
      A list of [d, d_i] arrays with orthonormal columns; the d_i sum to d.
    """
    a = _check_square('A', a)
    values, vectors = _sym_eigh(a)
    tol = rtol * max(float(np.max(np.abs(values))), np.finfo(np.float64).tiny)
    groups, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[start] - values[i] > tol:
            groups.append(vectors[:, start:i])
            start = i
    return groups


def _check_positive_definite(name: str, b: np.ndarray) -> np.ndarray:
    b = _check_square(name, b)
    b = (b + b.T) / 2
    smallest = float(np.linalg.eigvalsh(b)[0])
    if not smallest > 0:
        raise ValueError(f'{name} must be positive definite; its smallest eigenvalue is {smallest:.3g}. '
                         'Estimate Σ_w from more filters than the filter dimension d.')
    return b


def subspace_misalignment(bases: Sequence[np.ndarray], b: np.ndarray) -> float:
    """Σ_i sqrt(tr(B|V_i) · tr(B⁻¹|V_i)) − d for an orthogonal decomposition ⊕ V_i of R^d.

    `B|V_i` is the compression P_i B P_i to V_i (Proposition 2.7), so
    tr(B|V_i) = tr(Q_iᵀ B Q_i) for an orthonormal basis Q_i of V_i.

    Args:
      bases: [d, d_i] orthonormal bases of mutually orthogonal subspaces spanning R^d.
      b: [d, d] positive definite.

    Returns:
      The misalignment (>= 0 up to rounding).
    """
    b = _check_positive_definite('B', b)
    b_inv = np.linalg.inv(b)
    d = b.shape[0]
    if sum(q.shape[1] for q in bases) != d:
        raise ValueError(f'The subspaces have dimensions {[q.shape[1] for q in bases]}, which do not sum to d={d}.')
    total = 0.0
    for q in bases:
        q = np.asarray(q, dtype=np.float64)
        total += np.sqrt(np.trace(q.T @ b @ q) * np.trace(q.T @ b_inv @ q))
    return float(total - d)


def misalignment(a: np.ndarray, b: np.ndarray, rtol: float = 1e-8) -> float:
    """M(A, B) of Definition 2 in closed form (Proposition 2.7).

    M(A, B) = inf over Σ ≻ 0 aligned with A of ½ tr(Σ⁻¹B + B⁻¹Σ) − d
            = Σ_i sqrt(tr(B|V_i) tr(B⁻¹|V_i)) − d,  V_i the eigenspaces of A.
    M >= 0, with equality iff B is aligned with A; invariant under B -> λB.

    Args:
      a: [d, d] symmetric (e.g. the data covariance Σ_x); only its eigenspaces matter.
      b: [d, d] positive definite (e.g. the filter covariance Σ_w).
      rtol: eigenvalues of A closer than this (relative) form one eigenspace.

    Raises:
      ValueError: non-square or mismatched shapes, or B not positive definite.
    """
    a = _check_square('A', a)
    b = _check_square('B', b)
    if a.shape != b.shape:
        raise ValueError(f'A and B must have the same shape, got {a.shape} and {b.shape}.')
    return subspace_misalignment(eigenspaces(a, rtol), b)


def basis_misalignment(basis: np.ndarray, b: np.ndarray) -> float:
    """Σ_i sqrt((v_iᵀ B v_i)(v_iᵀ B⁻¹ v_i)) − d over the columns v_i of an orthonormal basis.

    Equals `misalignment(A, B)` when the columns are eigenvectors of an A with distinct
    eigenvalues (the A.6 formula, with Definition 2's − d).
    """
    basis = _check_square('basis', basis)
    gram_error = float(np.max(np.abs(basis.T @ basis - np.eye(basis.shape[0]))))
    if gram_error > 1e-6:
        raise ValueError(f'basis columns must be orthonormal; max |QᵀQ − I| = {gram_error:.3g}.')
    return subspace_misalignment([basis[:, i:i + 1] for i in range(basis.shape[1])], b)


def random_orthonormal_basis(d: int, seed: Seed = None) -> np.ndarray:
    """A Haar-distributed random orthogonal [d, d] matrix (QR of a Gaussian, signs fixed)."""
    if d < 1:
        raise ValueError(f'd must be >= 1, got {d}.')
    z = _rng(seed).normal(size=(d, d))
    q, r = np.linalg.qr(z)
    return q * np.sign(np.diag(r))


def random_basis_misalignment(b: np.ndarray, num_bases: int = 20, seed: Seed = 0) -> np.ndarray:
    """The control of Fig. 2: `basis_misalignment` over `num_bases` Haar-random bases.

    Returns:
      [num_bases] misalignments (report their mean ± std).
    """
    if num_bases < 1:
        raise ValueError(f'num_bases must be >= 1, got {num_bases}.')
    b = _check_square('B', b)
    rng = _rng(seed)
    return np.array([basis_misalignment(random_orthonormal_basis(b.shape[0], rng), b) for _ in range(num_bases)])


# ---- eigenvalue transfer function (Definition 3) -------------------------------------------------


def transfer_function(sigma_x: np.ndarray, sigma_w: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """f(σ_i) = sqrt(v_iᵀ Σ_w v_i) for the unit eigenvectors v_i of Σ_x (Definition 3, eq. 2-3).

    Args:
      sigma_x: [d, d] data covariance, eigenvalues σ_i².
      sigma_w: [d, d] weight covariance.

    Returns:
      `(sigma, tau)`, each [d], ordered by decreasing σ: σ_i = sqrt(eigenvalue i of Σ_x) and
      τ_i = f(σ_i).
    """
    sigma_x = _check_square('Σ_x', sigma_x)
    sigma_w = _check_square('Σ_w', sigma_w)
    if sigma_x.shape != sigma_w.shape:
        raise ValueError(f'Σ_x and Σ_w must have the same shape, got {sigma_x.shape} and {sigma_w.shape}.')
    values, vectors = _sym_eigh(sigma_x)
    tau_sq = np.einsum('di,de,ei->i', vectors, sigma_w, vectors)
    return np.sqrt(np.clip(values, 0, None)), np.sqrt(np.clip(tau_sq, 0, None))


def synthetic_variances(lo: float = 0.1, hi: float = 3.0, step: float = 0.1) -> np.ndarray:
    """(0.1, 0.2, ..., 3.0): the diagonal of Σ_x in Fig. 4 (left) and appendix E.1."""
    n = int(round((hi - lo) / step)) + 1
    return lo + step * np.arange(n)


def gaussian_inputs(num_examples: int, variances: Sequence[float], seed: Seed = 0) -> np.ndarray:
    """[num_examples, d] samples of N(0, diag(variances)) (appendix E.1)."""
    v = np.asarray(variances, dtype=np.float64)
    if np.any(v <= 0):
        raise ValueError(f'variances must be > 0, got {v.tolist()}.')
    return (_rng(seed).normal(size=(int(num_examples), len(v))) * np.sqrt(v)).astype(np.float32)


# ---- Fig. 3: eigenvector matching ---------------------------------------------------------------


def eigenvector_matches(sigma_x: np.ndarray, sigma_w: np.ndarray, num_filters: int = 10,
                        threshold: float = 0.4) -> list:
    """For the top eigenvectors v_w of Σ_w, the eigenvectors v_x of Σ_x with |⟨v_x, v_w⟩| > threshold.

    Fig. 3 (appendix D.1): each v_w is shown with its matching v_x and, if several match, their
    weighted sum v̄_x = Σ ⟨v_x, v_w⟩ v_x (normalised).

    Returns:
      One dict per v_w (rank order): `rank_w`, `eigenvalue_w`, `v_w` [d], `ranks_x` (matching
      Σ_x eigenvector ranks), `inner` (their inner products), `v_x` [m, d], `v_x_bar` [d].
    """
    values_w, vectors_w = _sym_eigh(_check_square('Σ_w', sigma_w))
    _, vectors_x = _sym_eigh(_check_square('Σ_x', sigma_x))
    out = []
    for i in range(min(num_filters, len(values_w))):
        v_w = vectors_w[:, i]
        inner = vectors_x.T @ v_w
        ranks = np.flatnonzero(np.abs(inner) > threshold)
        v_bar = vectors_x[:, ranks] @ inner[ranks] if len(ranks) else np.zeros_like(v_w)
        norm = np.linalg.norm(v_bar)
        out.append({'rank_w': i, 'eigenvalue_w': float(values_w[i]), 'v_w': v_w, 'ranks_x': ranks.tolist(),
                    'inner': inner[ranks].tolist(), 'v_x': vectors_x[:, ranks].T,
                    'v_x_bar': v_bar / norm if norm > 0 else v_bar})
    return out


def as_filter_image(vector: np.ndarray, kernel_size: int, channels: int) -> np.ndarray:
    """A flattened (kh, kw, C) vector as a [k, k, C] image scaled to [0, 1] for display (Fig. 3)."""
    img = np.asarray(vector, dtype=np.float64).reshape(kernel_size, kernel_size, channels)
    span = np.max(np.abs(img))
    return 0.5 + 0.5 * img / span if span > 0 else np.full_like(img, 0.5)


# ---- initialisations (Fig. 5, sec. 2.5) ---------------------------------------------------------


def sample_filters(sigma_w: np.ndarray, kernel_shape: Sequence[int], seed: Seed = 0,
                   mean: Optional[np.ndarray] = None) -> np.ndarray:
    """A kernel whose filters are i.i.d. draws from N(mean, Σ_w) (the "covariance" init, Fig. 5).

    Σ_w may be singular (rank-deficient, e.g. τ = 0 beyond the top eigenvectors, appendix E.3):
    samples are V diag(sqrt(max(λ, 0))) z with Σ_w = V diag(λ) Vᵀ.

    Args:
      sigma_w: [d, d] covariance, d = prod(kernel_shape[:-1]).
      kernel_shape: e.g. [kh, kw, C_in, C_out]; C_out filters are drawn.
      seed: sampling seed.
      mean: [d] mean filter (default 0, as in Proposition 1).

    Returns:
      float32 array of `kernel_shape`.
    """
    sigma_w = _check_square('Σ_w', sigma_w)
    shape = tuple(int(s) for s in kernel_shape)
    d = int(np.prod(shape[:-1]))
    if sigma_w.shape[0] != d:
        raise ValueError(f'Σ_w is {sigma_w.shape} but kernel_shape {shape} has filters of dimension {d}.')
    values, vectors = _sym_eigh(sigma_w)
    root = vectors * np.sqrt(np.clip(values, 0, None))
    z = _rng(seed).normal(size=(shape[-1], d))
    rows = z @ root.T + (0 if mean is None else np.asarray(mean, dtype=np.float64))
    return rows.T.reshape(shape).astype(np.float32)


def eigen_filters(sigma_x: np.ndarray, kernel_shape: Sequence[int], taus: Optional[Sequence[float]] = None,
                  mode: str = 'eigenvectors', seed: Seed = 0) -> np.ndarray:
    """Filters from the top eigenvectors e_1, e_2, ... of an input covariance (sec. 2.5, appendix E.3).

    `mode='eigenvectors'`: filter i is τ_i e_i (Table 1/2). If the layer has more filters than
    the input dimension d, the extra filters are drawn from N(0, Σ τ_i² e_i e_iᵀ).
    `mode='sample'`: every filter is drawn from N(0, Σ τ_i² e_i e_iᵀ) (Table 4).

    Args:
      sigma_x: [d, d] covariance of the layer's input patches.
      kernel_shape: [kh, kw, C_in, C_out] (or [d, units]); m = C_out filters.
      taus: τ_1, ..., τ_m' (m' <= d): weights of the top eigenvectors; default: 1 for the top
        min(m, d) (f_2 of Fig. 23, Table 2).
      mode: 'eigenvectors' or 'sample'.
      seed: signs / samples seed.

    Returns:
      float32 array of `kernel_shape`.
    """
    modes = ('eigenvectors', 'sample')
    if mode not in modes:
        raise ValueError(f'Unknown eigen_filters mode {mode!r}; valid: {list(modes)}.')
    sigma_x = _check_square('Σ_x', sigma_x)
    shape = tuple(int(s) for s in kernel_shape)
    d, m = int(np.prod(shape[:-1])), shape[-1]
    if sigma_x.shape[0] != d:
        raise ValueError(f'Σ_x is {sigma_x.shape} but kernel_shape {shape} has filters of dimension {d}.')
    taus = np.ones(min(m, d)) if taus is None else np.asarray(taus, dtype=np.float64)
    if taus.ndim != 1 or not 1 <= len(taus) <= d or np.any(taus < 0):
        raise ValueError(f'taus must be 1 to d={d} non-negative values, got {taus.tolist()}.')
    _, vectors = _sym_eigh(sigma_x)
    top = vectors[:, :len(taus)] * taus  # columns τ_i e_i
    rng = _rng(seed)
    cov = top @ top.T
    if mode == 'sample':
        return sample_filters(cov, shape, rng)
    rows = list(top.T[:m])
    if m > len(rows):
        extra = sample_filters(cov, (d, m - len(rows)), rng)
        rows += list(extra.T)
    signs = rng.choice([-1.0, 1.0], size=m)  # eigenvectors have no sign; draw one per filter
    kernel = np.stack(rows) * signs[:, np.newaxis]
    return kernel.T.reshape(shape).astype(np.float32)
