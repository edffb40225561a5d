"""Geometry of the keys: which keys are vertices of their convex hull, and how spread their norms are.

Only a key that is a vertex of the convex hull of all keys can win a row's argmax: the score
q . k is linear in k, and a linear function on a polytope is maximised at a vertex. So the number of
hull vertices caps the hardmax rank (chapter 3).

`hull_vertex_mask` decides, for every point, whether it is a vertex:

1. cheap **vertex certificates**: a direction u in which the point is the strict argmax of u . k proves
   it is a vertex. Directions tried: the point itself, the point minus the centroid, random directions,
   and a few batched perceptron steps towards a separating direction. Each certificate is checked
   directly (strict inequality in float64), so none can be wrong.
2. cheap **interior certificates** (d <= 4): an explicit convex combination of d + 1 certified
   vertices with all weights positive, found through a Delaunay triangulation and checked directly.
3. for every point left, an **exact LP membership test** (`scipy.optimize.linprog`, HiGHS): the point is
   *not* a vertex exactly when it is a convex combination of the other points,
   `lambda >= 0, sum lambda = 1, sum_i lambda_i k_i = k_j` is feasible. The LP is first tried against
   the certified vertices only (a small LP; feasible already proves "interior"), then against all others.

Arrays are numpy float64, shaped `(n, d)` for one point cloud.
"""

import numpy as np
from scipy.optimize import linprog


def _as_points(points) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim == 1:
        pts = pts[:, None]
    if pts.ndim != 2 or pts.shape[0] == 0:
        raise ValueError(f"points must have shape (n, d) with n >= 1; got {np.shape(points)}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points must be finite")
    return pts


def strict_winners(points: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Boolean mask `(n,)` of points that are the strict argmax of u . k for at least one direction u `(m, d)`."""
    scores = directions @ points.T  # (m, n)
    if scores.shape[1] == 1:
        return np.ones(1, dtype=bool)
    top2 = np.partition(scores, -2, axis=1)[:, -2:]  # (m, 2): second best, best
    best = scores.argmax(axis=1)
    strict = top2[:, 1] > top2[:, 0]
    mask = np.zeros(points.shape[0], dtype=bool)
    mask[best[strict]] = True
    return mask


def _own_direction_winners(points: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Point j is certified when it strictly wins in its own direction `directions[j]`."""
    scores = directions @ points.T  # (n, n): row j scores every point in direction u_j
    own = np.diagonal(scores).copy()
    np.fill_diagonal(scores, -np.inf)
    return own > scores.max(axis=1)


def _perceptron_winners(points: np.ndarray, active: np.ndarray, steps: int) -> np.ndarray:
    """Batched subgradient steps on u_j towards a direction in which point j beats every other point."""
    n = points.shape[0]
    won = np.zeros(n, dtype=bool)
    idx = np.where(active)[0]
    if idx.size == 0 or n < 2:
        return won
    u = points[idx] - points.mean(axis=0)
    for step in range(steps):
        scores = u @ points.T  # (a, n)
        own = scores[np.arange(idx.size), idx].copy()
        scores[np.arange(idx.size), idx] = -np.inf
        rival = scores.argmax(axis=1)
        now = own > scores[np.arange(idx.size), rival]
        won[idx[now]] = True
        keep = ~now
        if not keep.any():
            break
        idx, u, rival = idx[keep], u[keep], rival[keep]
        push = points[idx] - points[rival]
        push /= np.maximum(np.linalg.norm(push, axis=1, keepdims=True), 1e-300)
        scale = np.linalg.norm(u, axis=1, keepdims=True) + 1e-300
        u = u + push * scale / np.sqrt(step + 2.0)
    return won


def in_convex_hull(point, others) -> bool:
    """Exact LP membership test: is `point` `(d,)` a convex combination of the rows of `others` `(m, d)`?"""
    others = _as_points(others)
    point = np.asarray(point, dtype=np.float64).reshape(-1)
    m = others.shape[0]
    a_eq = np.vstack([others.T, np.ones((1, m))])  # (d + 1, m)
    b_eq = np.append(point, 1.0)
    result = linprog(np.zeros(m), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if result.status not in (0, 2):
        raise RuntimeError(f"LP membership test failed: {result.message}")
    return result.status == 0  # 0: feasible (inside), 2: infeasible (outside)


def _simplex_interior(points: np.ndarray, certified: np.ndarray, candidates: np.ndarray,
                      margin: float = 1e-9) -> np.ndarray:
    """Points proven interior by an explicit convex combination of d + 1 certified vertices.

    A Delaunay triangulation of the certified vertices proposes a simplex for each candidate; the
    barycentric weights are recomputed and the point counts as interior only if every weight exceeds
    `margin` (then it lies strictly inside a simplex of other points, so it is not a vertex). Used for
    d <= 4, where most points are interior and one LP per point would be slow; the rest go to the LP.
    """
    n, d = points.shape
    inside = np.zeros(n, dtype=bool)
    idx = np.where(candidates)[0]
    if idx.size == 0 or certified.shape[0] < d + 1:
        return inside
    if d == 1:
        low, high = certified[:, 0].min(), certified[:, 0].max()
        x = points[idx, 0]
        inside[idx] = (x > low + margin * (high - low)) & (x < high - margin * (high - low))
        return inside
    if d > 4:  # Delaunay triangulations grow too fast beyond 4 dimensions; the LP takes over
        return inside
    from scipy.spatial import Delaunay, QhullError

    try:
        tri = Delaunay(certified)
    except QhullError:
        return inside
    simplex = tri.find_simplex(points[idx])
    ok = simplex >= 0
    if not ok.any():
        return inside
    idx, simplex = idx[ok], simplex[ok]
    corners = certified[tri.simplices[simplex]]  # (a, d + 1, d)
    # barycentric weights: solve [corners^T; 1] w = [x; 1] for each candidate
    system = np.concatenate([corners.transpose(0, 2, 1), np.ones((idx.size, 1, d + 1))], axis=1)  # (a, d+1, d+1)
    rhs = np.concatenate([points[idx], np.ones((idx.size, 1))], axis=1)  # (a, d + 1)
    weights = np.linalg.solve(system, rhs[..., None])[..., 0]  # (a, d + 1)
    residual = np.abs(np.einsum("ak,akd->ad", weights, corners) - points[idx]).max(axis=1)
    scale = np.abs(points).max()
    good = (weights.min(axis=1) > margin) & (residual < 1e-9 * scale)
    inside[idx[good]] = True
    return inside


def hull_vertex_mask(points, rng: np.random.Generator | None = None, random_directions: int | None = None,
                     perceptron_steps: int = 60, return_stats: bool = False):
    """Boolean mask `(n,)`: which points are vertices of the convex hull of all points.

    Duplicate points are never vertices of a strict kind; inputs are assumed in general position
    (true with probability one for continuous random points).
    """
    pts = _as_points(points)
    n, d = pts.shape
    if n <= 2 or d == 0:
        mask = np.ones(n, dtype=bool) if n <= 2 else np.zeros(n, dtype=bool)
        return (mask, {"certified": int(mask.sum()), "simplex": 0, "lp_small": 0, "lp_full": 0}) if return_stats else mask
    rng = rng if rng is not None else np.random.default_rng(0)
    centred = pts - pts.mean(axis=0)
    vertex = _own_direction_winners(pts, pts) | _own_direction_winners(pts, centred)
    m = random_directions if random_directions is not None else min(4096, 16 * n)
    vertex |= strict_winners(pts, rng.standard_normal((m, d)))
    vertex |= _perceptron_winners(pts, ~vertex, perceptron_steps)
    stats = {"certified": int(vertex.sum()), "simplex": 0, "lp_small": 0, "lp_full": 0}
    certified = pts[vertex]
    interior = _simplex_interior(pts, certified, ~vertex)
    stats["simplex"] = int(interior.sum())
    for j in np.where(~vertex & ~interior)[0]:
        stats["lp_small"] += 1
        if certified.shape[0] > 0 and in_convex_hull(pts[j], certified):
            continue  # inside the hull of some certified vertices: not a vertex
        stats["lp_full"] += 1
        vertex[j] = not in_convex_hull(pts[j], np.delete(pts, j, axis=0))
    return (vertex, stats) if return_stats else vertex


def count_hull_vertices(points, **options) -> int:
    """Number of vertices of the convex hull of the rows of `points` `(n, d)`."""
    return int(hull_vertex_mask(points, **options).sum())


def key_norm_stats(keys) -> dict:
    """Norm statistics of keys `(n, d)`: mean, std, relative std, and max / mean of |k|."""
    k = _as_points(keys)
    norms = np.linalg.norm(k, axis=1)
    mean = float(norms.mean())
    std = float(norms.std(ddof=1)) if norms.size > 1 else 0.0
    return {"norm_mean": mean, "norm_std": std, "norm_rel_std": std / mean if mean > 0 else float("nan"),
            "norm_max_over_mean": float(norms.max() / mean) if mean > 0 else float("nan")}


def argmax_win_counts(queries, keys) -> np.ndarray:
    """How many queries `(m, d)` pick each key `(n, d)` as their argmax: `(n,)` int."""
    q, k = _as_points(queries), _as_points(keys)
    winners = (q @ k.T).argmax(axis=1)
    return np.bincount(winners, minlength=k.shape[0])
