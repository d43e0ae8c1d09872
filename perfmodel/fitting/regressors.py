"""The model families, as estimators in scikit-learn's style.

Each follows scikit-learn's conventions: hyper-parameters in __init__ (get_params/set_params work,
so sklearn.base.clone does too), fit(X, y) returns self, learned attributes end in "_". X has two
columns, batch size b and input size s; y is a positive quantity (milliseconds, MiB).

Each also turns into plain JSON numbers (to_dict) and back (from_dict), and predicts with numpy
alone: scikit-learn is imported only inside fit, so a loaded predictor needs neither it nor torch.
All fit relative error (what MAPE measures), not absolute error.
"""

from __future__ import annotations

import inspect
from typing import ClassVar

import numpy as np

from perfmodel.errors import InputError, PerfmodelError, PredictorFormatError
from perfmodel.fitting.features import INTERCEPT, candidate_features, check_feature, design_matrix, pixels
from perfmodel.fitting.folds import batch_folds


class NotFittedError(PerfmodelError):
    """predict was called before fit."""


class _Estimator:
    family: ClassVar[str]

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> _Estimator:
        for name, value in params.items():
            if name not in self._param_names():
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def predict(self, X) -> np.ndarray:
        b, s = _columns(X)
        return self.evaluate(b, s)

    def evaluate(self, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        """predict for separate arrays of batch sizes and input sizes (any matching shapes)."""
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X, y) first.")
        return self._evaluate(np.asarray(b, dtype=float), np.asarray(s, dtype=float))

    def to_dict(self) -> dict:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; only a fitted model can be saved.")
        return {"family": self.family, "params": self.get_params(), "fitted": self._fitted_dict()}

    @staticmethod
    def from_dict(data: dict) -> _Estimator:
        """The estimator a to_dict() wrote; PredictorFormatError if the data do not describe one."""
        try:
            cls = FAMILIES[data["family"]]
            estimator = cls(**data["params"])
            estimator._load_fitted(data["fitted"])
        except PredictorFormatError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise PredictorFormatError(
                f"a fitted model in the predictor file is malformed ({type(exc).__name__}: {exc})."
            ) from None
        estimator.n_features_in_ = 2
        return estimator

    # Subclasses: fit, _evaluate, _fitted_dict, _load_fitted


def _columns(X) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2:
        raise InputError(f"X must have two columns, batch size and input size; got an array of shape {X.shape}.")
    return X[:, 0], X[:, 1]


def _training_data(X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b, s = _columns(X)
    y = np.asarray(y, dtype=float).ravel()
    if len(y) != len(b):
        raise InputError(f"X has {len(b)} rows but y has {len(y)} values.")
    if len(y) == 0:
        raise InputError("cannot fit on no data.")
    if not (np.all(np.isfinite(y)) and np.all(y > 0) and np.all(np.isfinite(b)) and np.all(b > 0) and np.all(s > 0)):
        raise InputError("batch sizes, input sizes and the values to fit must be finite and > 0.")
    return b, s, y


# No fitted number comes near this (milliseconds and MiB up to 1e9, features up to ~1e11); a file's number
# beyond it would only overflow predictions to infinity.
_LARGEST = 1e30


def _floats(values, name: str) -> np.ndarray:
    if isinstance(values, (bool, str)) or (
        isinstance(values, list) and any(isinstance(v, (bool, str, list, dict)) for v in values)
    ):
        raise PredictorFormatError(f"the predictor file has something other than numbers in {name}.")
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)) or np.any(np.abs(array) > _LARGEST):
        raise PredictorFormatError(f"the predictor file has a non-finite number, or one beyond 1e30, in {name}.")
    return array


def _ints(values, name: str) -> np.ndarray:
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise PredictorFormatError(f"the predictor file has something other than whole numbers in {name}.")
    return np.asarray(values, dtype=np.int64)


class FeatureLinearRegression(_Estimator):
    """Linear regression on engineered features, chosen by forward selection (as in [gpuaas-prediction],
    docs/design.md).

    Starting from an intercept, add the candidate feature that most lowers the leave-one-batch-size-
    out MAPE; stop when no candidate lowers it by a fraction `tol`, or at `max_features` features.
    With fewer than three batch sizes there is nothing to select with: the model is 1 + b*p.
    """

    family = "linear"

    def __init__(self, max_features: int = 4, tol: float = 0.1, candidates: list[str] | None = None):
        self.max_features = max_features
        self.tol = tol
        self.candidates = candidates

    def fit(self, X, y) -> FeatureLinearRegression:
        b, s, y = _training_data(X, y)
        names = [INTERCEPT, *(self.candidates if self.candidates is not None else candidate_features(b))]
        # Dividing each row by its y makes least squares minimise relative error.
        Z = design_matrix(names, b, s) / y[:, None]
        scale = np.sqrt(np.mean(Z**2, axis=0))
        scale[scale == 0] = 1.0
        Z = Z / scale
        if len(np.unique(b)) >= 3:
            chosen, self.cv_mape_ = self._select(Z, b)
        else:
            chosen, self.cv_mape_ = (
                [0] + ([names.index("b*p")] if "b*p" in names and len(np.unique(b)) > 1 else []),
                None,
            )
        coef = np.linalg.lstsq(Z[:, chosen], np.ones(len(y)), rcond=None)[0] / scale[chosen]
        self.features_ = tuple(names[i] for i in chosen[1:])
        self.intercept_ = float(coef[0])
        self.coef_ = coef[1:]
        self.n_features_in_ = 2
        return self

    def _select(self, Z: np.ndarray, b: np.ndarray) -> tuple[list[int], float]:
        folds = batch_folds(b)
        chosen = [0]
        score = float(_lobo_mape(Z, folds, np.array([chosen]))[0])
        while len(chosen) - 1 < self.max_features:
            rest = [c for c in range(1, Z.shape[1]) if c not in chosen]
            if not rest:
                break
            scores = _lobo_mape(Z, folds, np.array([chosen + [c] for c in rest]))
            best = int(np.argmin(scores))
            if not scores[best] < score * (1 - self.tol):
                break
            chosen.append(rest[best])
            score = float(scores[best])
        return chosen, score

    def _evaluate(self, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        b, s = np.broadcast_arrays(b, s)
        out = np.full(b.shape, self.intercept_)
        if self.features_:
            out = out + design_matrix(self.features_, b.ravel(), s.ravel()).reshape(*b.shape, -1) @ self.coef_
        return out

    def _fitted_dict(self) -> dict:
        return {
            "intercept": self.intercept_,
            "features": list(self.features_),
            "coef": self.coef_.tolist(),
            "cv_mape": self.cv_mape_,
        }

    def _load_fitted(self, fitted: dict) -> None:
        self.features_ = tuple(check_feature(str(name)) for name in fitted["features"])
        self.intercept_ = float(_floats(fitted["intercept"], "an intercept"))
        self.coef_ = _floats(fitted["coef"], "coefficients").reshape(-1)
        if len(self.coef_) != len(self.features_):
            raise PredictorFormatError(
                "the predictor file has a linear model whose coefficients do not match its features."
            )
        self.cv_mape_ = fitted.get("cv_mape")


def _lobo_mape(Z: np.ndarray, folds, subsets: np.ndarray) -> np.ndarray:
    """Leave-one-batch-size-out MAPE (%) of least squares on each column subset of Z, all at once.

    Z is the design already divided by y, so the target is 1 and |prediction - 1| is the relative
    error. The subsets (S, m) are solved as one batch of small normal equations per fold; a tiny
    ridge keeps folds where a column is constant or collinear solvable.
    """
    A = np.moveaxis(Z[:, subsets], 0, 1)  # (S, n, m)
    errors = np.empty(A.shape[:2])
    ridge = 1e-9 * len(Z) * np.eye(subsets.shape[1])
    for fold in folds:
        train = A[:, ~fold.test]
        gram = np.swapaxes(train, 1, 2) @ train + ridge
        beta = np.linalg.solve(gram, train.sum(axis=1)[..., None])
        errors[:, fold.test] = np.abs((A[:, fold.test] @ beta)[..., 0] - 1.0)
    return errors.mean(axis=1) * 100.0


class RooflineRegression(_Estimator):
    """The shape of a GPU's latency curve: a smooth maximum of a launch floor and a roofline-like term.

        y = (f^k + max(a + c*w, 0)^k)^(1/k),   w = b * (s/224)^2 (the work of a call)

    f is the floor that small batches cannot go below (kernel launches, the framework, the host), c
    the time per 224-px image once the GPU is busy (1/c its saturated throughput), a >= 0 a fixed
    part of the busy time, and k how sharply one regime hands over to the other (k = 1 adds them,
    large k is a hard max). Past the data it stays linear in the batch, never flat. Fitted on relative
    error for every k in `sharpness_grid` at once (`_fit_roofline`); the k with the least error wins.
    `intercept=False` fixes a = 0, the form used to carry a curve to another GPU (transfer.py).
    """

    family = "roofline"
    SHARPNESS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)

    def __init__(self, intercept: bool = True, sharpness_grid: tuple[float, ...] | None = None):
        self.intercept = intercept
        self.sharpness_grid = sharpness_grid

    def fit(self, X, y) -> RooflineRegression:
        b, s, y = _training_data(X, y)
        if len(np.unique(b * pixels(s))) < 2:
            raise InputError("the roofline needs points at two or more batch sizes to fit; these data have one.")
        ks = np.asarray(self.sharpness_grid or self.SHARPNESS, dtype=float)
        self.floor_, self.intercept_, self.slope_, self.sharpness_ = _fit_roofline(b * pixels(s), y, ks, self.intercept)
        self.n_features_in_ = 2
        return self

    def _evaluate(self, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        return _roofline(b * pixels(s), self.floor_, self.intercept_, self.slope_, self.sharpness_)

    def _fitted_dict(self) -> dict:
        return {"floor": self.floor_, "intercept": self.intercept_, "slope": self.slope_, "sharpness": self.sharpness_}

    def _load_fitted(self, fitted: dict) -> None:
        values = _floats(
            [fitted["floor"], fitted["intercept"], fitted["slope"], fitted["sharpness"]], "a roofline model"
        )
        self.floor_, self.intercept_, self.slope_, self.sharpness_ = (float(v) for v in values)
        if self.floor_ < 0 or self.slope_ < 0 or not 0.5 <= self.sharpness_ <= 64:
            raise PredictorFormatError(
                "the predictor file has a roofline model with a negative floor or slope, or a sharpness outside 0.5-64."
            )


def _fit_roofline(
    w: np.ndarray, y: np.ndarray, ks: np.ndarray, intercept: bool, iterations: int = 80
) -> tuple[float, float, float, float]:
    """Least relative squares of the roofline for every sharpness in ks at once (Levenberg-Marquardt).

    Parameters are log f, log c and (with an intercept) log a, so f, c > 0 and a >= 0 hold without
    bounds. Two starts per k: a floor at the smallest value with the slope of the largest point, and
    half that floor with the secant of the two largest works. Returns (f, a, c, k) of the best.
    """
    order = np.argsort(w)
    ws, ys = w[order], y[order]
    slopes = [np.max(y) / np.max(w)]
    if ws[-1] > ws[-2] and ys[-1] > ys[-2]:
        slopes.append((ys[-1] - ys[-2]) / (ws[-1] - ws[-2]))
    floors = [np.min(y), np.min(y) / 2][: len(slopes)]
    starts = [
        [np.log(f), np.log(c)] + ([np.log(1e-3 * np.min(y))] if intercept else []) for f, c in zip(floors, slopes)
    ]
    k = np.repeat(ks, len(starts))[:, None]  # (R, 1): every (k, start) pair is one run
    p = np.tile(np.array(starts), (len(ks), 1))  # (R, P)
    lam = np.full(len(p), 1e-2)

    def residuals_and_jacobian(p):
        f, c = np.exp(p[:, :1]), np.exp(p[:, 1:2])
        a = np.exp(p[:, 2:3]) if intercept else np.zeros_like(f)
        busy = a + c * w[None, :]
        fit = _roofline_rows(w, f, a, c, k)
        d_floor = (f / fit) ** (k - 1)  # d fit / d f
        d_busy = (busy / fit) ** (k - 1)
        columns = [f * d_floor, c * w[None, :] * d_busy] + ([a * d_busy] if intercept else [])
        return fit / y - 1.0, np.stack(columns, axis=-1) / y[None, :, None]

    r, J = residuals_and_jacobian(p)
    cost = np.sum(r**2, axis=1)
    quiet = 0
    for _ in range(iterations):
        JtJ = np.einsum("rni,rnj->rij", J, J)
        g = np.einsum("rni,rn->ri", J, r)
        damped = JtJ + lam[:, None, None] * (
            np.eye(p.shape[1]) * np.maximum(np.diagonal(JtJ, axis1=1, axis2=2), 1e-12)[:, None, :]
        )
        step = np.linalg.solve(damped + 1e-12 * np.eye(p.shape[1]), -g[..., None])[..., 0]
        trial = np.clip(p + step, -40.0, 40.0)
        r_new, J_new = residuals_and_jacobian(trial)
        new_cost = np.sum(r_new**2, axis=1)
        better = np.isfinite(new_cost) & (new_cost < cost)
        gain = np.max(np.where(better, (cost - new_cost) / np.maximum(cost, 1e-300), 0.0))
        quiet = quiet + 1 if gain < 1e-10 else 0
        if quiet >= 4:  # no run improves any more
            break
        p = np.where(better[:, None], trial, p)
        r = np.where(better[:, None], r_new, r)
        J = np.where(better[:, None, None], J_new, J)
        cost = np.where(better, new_cost, cost)
        lam = np.where(better, lam / 3, np.minimum(lam * 4, 1e12))
    best = int(np.argmin(np.where(np.isfinite(cost), cost, np.inf)))
    f, c = np.exp(p[best, 0]), np.exp(p[best, 1])
    a = float(np.exp(p[best, 2])) if intercept else 0.0
    return float(f), a, float(c), float(k[best, 0])


def _roofline_rows(w: np.ndarray, f: np.ndarray, a: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """_roofline for R parameter rows (columns of shape (R, 1)) over the same works w: shape (R, n)."""
    busy = np.maximum(a + c * w[None, :], 0.0)
    top = np.maximum(busy, f)
    return top * ((f / top) ** k + (busy / top) ** k) ** (1.0 / k)


def _roofline(w: np.ndarray, floor: float, intercept: float, slope: float, k: float) -> np.ndarray:
    """(floor^k + max(intercept + slope*w, 0)^k)^(1/k), scaled by the larger term so that no power overflows."""
    busy = np.maximum(intercept + slope * np.asarray(w, dtype=float), 0.0)
    top = np.maximum(busy, floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = top * ((floor / top) ** k + (busy / top) ** k) ** (1.0 / k)
    return np.where(top > 0, out, 0.0)


class MonotonePiecewiseLinear(_Estimator):
    """A non-decreasing piecewise-linear function of the work w = b * (s/224)^2.

    Fitted by weighted isotonic regression (relative error); between knots it interpolates, above
    the largest measured work it continues the last segment's slope, below the smallest it is flat.
    """

    family = "piecewise"

    def __init__(self):
        pass

    def fit(self, X, y) -> MonotonePiecewiseLinear:
        from sklearn.isotonic import IsotonicRegression

        b, s, y = _training_data(X, y)
        w = b * pixels(s)
        iso = IsotonicRegression(increasing=True).fit(w, y, sample_weight=1.0 / y**2)
        self.knots_w_ = np.asarray(iso.X_thresholds_, dtype=float)
        self.knots_y_ = np.asarray(iso.y_thresholds_, dtype=float)
        self.n_features_in_ = 2
        return self

    @classmethod
    def from_knots(cls, w, y) -> MonotonePiecewiseLinear:
        """The curve through given (work, value) knots, works increasing, values made non-decreasing
        (a curve carried to another GPU: perfmodel.fitting.transfer)."""
        model = cls()
        model._load_fitted(
            {"knots_w": [float(v) for v in w], "knots_y": np.maximum.accumulate(np.asarray(y, float)).tolist()}
        )
        model.n_features_in_ = 2
        return model

    def _evaluate(self, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        w = b * pixels(s)
        kw, ky = self.knots_w_, self.knots_y_
        out = np.interp(w, kw, ky)
        if len(kw) >= 2:
            slope = (ky[-1] - ky[-2]) / (kw[-1] - kw[-2])
            out = np.where(w > kw[-1], ky[-1] + slope * (w - kw[-1]), out)
        return out

    def _fitted_dict(self) -> dict:
        return {"knots_w": self.knots_w_.tolist(), "knots_y": self.knots_y_.tolist()}

    def _load_fitted(self, fitted: dict) -> None:
        self.knots_w_ = _floats(fitted["knots_w"], "knots").reshape(-1)
        self.knots_y_ = _floats(fitted["knots_y"], "knots").reshape(-1)
        if len(self.knots_w_) != len(self.knots_y_) or len(self.knots_w_) == 0 or np.any(np.diff(self.knots_w_) <= 0):
            raise PredictorFormatError("the predictor file has a piecewise model whose knots are not increasing pairs.")


class TreeEnsembleRegression(_Estimator):
    """Gradient-boosted regression trees on log y: the baseline (it cannot extrapolate: flat outside).

    Fitted with scikit-learn; the trees are kept as plain arrays. On two inputs the ensemble is
    constant on the cells between the split thresholds, so predicting compiles it once into a
    table over those cells and then answers any number of queries with two binary searches.
    """

    family = "tree"

    def __init__(self, n_estimators: int = 50, max_depth: int = 3, learning_rate: float = 0.2, random_state: int = 0):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.random_state = random_state

    def fit(self, X, y) -> TreeEnsembleRegression:
        from sklearn.ensemble import GradientBoostingRegressor

        b, s, y = _training_data(X, y)
        X = np.column_stack([b, s])
        gbr = GradientBoostingRegressor(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            random_state=self.random_state,
        ).fit(X, np.log(y))
        self.init_ = float(np.ravel(gbr.init_.predict(X[:1]))[0])
        self.trees_ = tuple(
            {
                "feature": t.tree_.feature.astype(np.int64),
                "threshold": t.tree_.threshold.astype(float),
                "left": t.tree_.children_left.astype(np.int64),
                "right": t.tree_.children_right.astype(np.int64),
                "value": t.tree_.value.reshape(-1).astype(float),
            }
            for t in gbr.estimators_[:, 0]
        )
        self._table = None
        self.n_features_in_ = 2
        return self

    def _compile(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cuts = []
        for column in (0, 1):
            values = [t["threshold"][(t["left"] >= 0) & (t["feature"] == column)] for t in self.trees_]
            cuts.append(np.unique(np.concatenate(values)) if values else np.empty(0))
        # One representative per cell: the cell's upper threshold (x <= t goes left), or beyond the last.
        reps = [np.append(c, c[-1] + 1.0) if len(c) else np.array([1.0]) for c in cuts]
        grid_b, grid_s = np.meshgrid(reps[0], reps[1], indexing="ij")
        points = np.column_stack([grid_b.ravel(), grid_s.ravel()])
        raw = self.init_ + self.learning_rate * sum(_tree_values(t, points) for t in self.trees_)
        return cuts[0], cuts[1], np.exp(raw).reshape(grid_b.shape)

    def _evaluate(self, b: np.ndarray, s: np.ndarray) -> np.ndarray:
        if getattr(self, "_table", None) is None:
            self._table = self._compile()
        cuts_b, cuts_s, table = self._table
        return table[np.searchsorted(cuts_b, b, side="left"), np.searchsorted(cuts_s, s, side="left")]

    def _fitted_dict(self) -> dict:
        return {"init": self.init_, "trees": [{k: v.tolist() for k, v in t.items()} for t in self.trees_]}

    def _load_fitted(self, fitted: dict) -> None:
        self.learning_rate = float(_floats(self.learning_rate, "the tree ensemble's learning rate"))  # used to predict
        self.init_ = float(_floats(fitted["init"], "the tree ensemble"))
        trees = []
        for t in fitted["trees"]:
            tree = {
                "feature": _ints(t["feature"], "a tree"),
                "threshold": _floats(t["threshold"], "a tree"),
                "left": _ints(t["left"], "a tree"),
                "right": _ints(t["right"], "a tree"),
                "value": _floats(t["value"], "a tree"),
            }
            n = len(tree["value"])
            inner = tree["left"] >= 0
            if (
                any(len(v) != n for v in tree.values())
                or n == 0
                or np.any(tree["left"][inner] >= n)
                or np.any(tree["right"][inner] >= n)
                or np.any(tree["right"][inner] < 0)
                or np.any((tree["feature"][inner] < 0) | (tree["feature"][inner] > 1))
                or np.any(tree["left"][inner] <= np.flatnonzero(inner))
                or np.any(tree["right"][inner] <= np.flatnonzero(inner))
            ):
                raise PredictorFormatError("the predictor file has a tree whose node arrays are inconsistent.")
            trees.append(tree)
        self.trees_ = tuple(trees)
        self._table = None


def _tree_values(tree: dict, points: np.ndarray) -> np.ndarray:
    """The leaf value of one tree for each point (vectorised walk down the tree)."""
    node = np.zeros(len(points), dtype=np.int64)
    rows = np.arange(len(points))
    while True:
        inner = tree["left"][node] >= 0
        if not inner.any():
            return tree["value"][node]
        go_left = points[rows, np.maximum(tree["feature"][node], 0)] <= tree["threshold"][node]
        node = np.where(inner, np.where(go_left, tree["left"][node], tree["right"][node]), node)


FAMILIES: dict[str, type[_Estimator]] = {
    cls.family: cls
    for cls in (RooflineRegression, FeatureLinearRegression, MonotonePiecewiseLinear, TreeEnsembleRegression)
}
