"""2-D embeddings of layer features for the visualisation of Stephenson et al. (ICLR 2021) Fig. 2B.

The paper uses UMAP (McInnes et al. 2018). `umap-learn` is an optional extra: `embed_2d` uses it
when it is installed (`method='auto'` or `'umap'`) and otherwise PCA (top two principal
components of the centred features, by SVD), and returns the method's name for the figure title.
"""

import importlib.util
from typing import Tuple

import numpy as np

METHODS = ('auto', 'pca', 'umap')


def umap_available() -> bool:
    return importlib.util.find_spec('umap') is not None


def pca_2d(features: np.ndarray) -> np.ndarray:
    """[n, d] -> [n, 2] projections on the top two principal components (sign: largest |loading| > 0)."""
    x = np.asarray(features, np.float64).reshape(len(features), -1)
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    components = vt[:2]
    if components.shape[0] < 2:  # d == 1: pad a zero axis
        components = np.vstack([components, np.zeros_like(components)])
    signs = np.sign(components[np.arange(2), np.argmax(np.abs(components), axis=1)])
    return x @ (components * np.where(signs == 0, 1.0, signs)[:, None]).T


def embed_2d(features: np.ndarray, method: str = 'auto', seed: int = 0) -> Tuple[np.ndarray, str]:
    """A 2-D embedding of `features` [n, ...] and the name of the method used ('UMAP' or 'PCA').

    Raises:
      ValueError: unknown method, fewer than 2 points, or 'umap' without umap-learn installed.
    """
    if method not in METHODS:
        raise ValueError(f'Unknown embedding method {method!r}; valid: {list(METHODS)}.')
    if len(features) < 2:
        raise ValueError(f'Need at least 2 points to embed, got {len(features)}.')
    if method == 'umap' and not umap_available():
        raise ValueError("method='umap' needs the optional umap-learn package; use 'pca' or 'auto'.")
    if method == 'pca' or (method == 'auto' and not umap_available()):
        return pca_2d(features), 'PCA'
    import umap  # pylint: disable=g-import-not-at-top  (optional extra)

    x = np.asarray(features, np.float64).reshape(len(features), -1)
    return umap.UMAP(n_components=2, random_state=seed).fit_transform(x), 'UMAP'
