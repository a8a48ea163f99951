"""SCCL: the loss against the authors' equations (values and gradients), q/p/KL by hand, the centroid file's
refusals, the centroids training and resuming, and the ways the starting centroids are made."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from augcse.core.schema import RecipeError
from augcse.losses import LOSSES, SCCLLoss, bind_dataset, kmeans_centroids, validate_loss
from augcse.losses.sccl import cluster_divergence, soft_assignment, target_distribution

DIM, K, ROWS = 32, 3, 6


# ------------------------------------------------------------------ the authors' equations, written out again

def reference_pair_contrast(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """amazon-science/sccl's instance loss from its equations: unit features of both views; row i of view 1 has
    its partner in view 2 as the positive and the 2N − 2 rows that are neither itself nor its partner as
    negatives (and the other way round); the mean of −log(pos / (pos + Σ neg)) over all 2N rows."""
    a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    both = torch.cat([a, b])
    n = a.size(0)
    terms = []
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        pos = torch.exp(both[i] @ both[partner] / tau)
        neg = sum(torch.exp(both[i] @ both[j] / tau) for j in range(2 * n) if j not in (i, partner))
        terms.append(-torch.log(pos / (pos + neg)))
    return torch.stack(terms).mean()


def reference_q(e: torch.Tensor, mu: torch.Tensor, alpha: float) -> torch.Tensor:
    """Student's t kernel 1/(1 + d²/α) raised to (α+1)/2, normalised over the K centroids, row by row."""
    rows = []
    for x in e:
        kernel = torch.stack([(1 + ((x - m) ** 2).sum() / alpha) ** -1 for m in mu]) ** ((alpha + 1) / 2)
        rows.append(kernel / kernel.sum())
    return torch.stack(rows)


def reference_p(q: torch.Tensor) -> torch.Tensor:
    """q² over the batch's soft cluster sizes (plus 1e-9), renormalised per row; no gradient."""
    q = q.detach()
    sizes = q.sum(0) + 1e-9
    weight = torch.stack([row ** 2 / sizes for row in q])
    return torch.stack([w / w.sum() for w in weight])


def reference_kl(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Σ_i Σ_k p log p − p log(q + 1e-8), summed (zero p terms count 0), over the batch size."""
    total = sum(p[i, k] * (torch.log(p[i, k]) - torch.log(q[i, k] + 1e-8))
                for i in range(q.size(0)) for k in range(q.size(1)) if p[i, k] > 0)
    return total / q.size(0)


def reference_total(loss: SCCLLoss, clustered, first, second, weights: tuple[float, float]) -> torch.Tensor:
    """The authors' training step: w·PairCon(head(view 1), head(view 2)) + η·KL(p‖q) on the clustered text."""
    contrastive = reference_pair_contrast(loss.head(first), loss.head(second), loss.temperature)
    q = reference_q(clustered, loss.centroids, loss.alpha)
    return weights[0] * contrastive + weights[1] * reference_kl(q, reference_p(q))


# ------------------------------------------------------------------ parity with the authors' code

def _seeded(tiny_st, seed: int = 0, **params) -> SCCLLoss:
    torch.manual_seed(seed)
    loss = SCCLLoss(tiny_st, clusters=K, **params).double()
    with torch.no_grad():
        loss.centroids.copy_(torch.randn(K, DIM, dtype=torch.float64))
    loss.centroids_source = "test"
    return loss


# (views, the explicit columns present, parameters, the authors' weights on the two terms)
PARITY = [
    ("dropout", None, {}, (10.0, 0.5)),  # the authors' virtual run script: --eta 10, 0.5 × cluster
    ("explicit", 2, {}, (10.0, 1.0)),  # the explicit run script: --eta 10, 1 × cluster
    ("explicit", 1, {}, (10.0, 1.0)),  # one augmentation column: the original is the second view
    ("dropout", None, {"alpha": 2.5, "eta": 3.0, "contrastive_weight": 1.0, "temperature": 0.2}, (1.0, 3.0)),
    ("explicit", 2, {"alpha": 0.5, "eta": 0.0}, (10.0, 0.0)),
    ("explicit", 1, {"alpha": 4.0, "eta": 2.0, "contrastive_weight": 0.5}, (0.5, 2.0)),
]


@pytest.mark.parametrize(("views", "augmentations", "params", "weights"), PARITY)
def test_value_and_gradients_equal_the_authors_equations(tiny_st, views, augmentations, params, weights):
    loss = _seeded(tiny_st, views=views, **params)
    torch.manual_seed(1)
    e = [(torch.randn(ROWS, DIM, dtype=torch.float64) * 2).requires_grad_() for _ in range(3)]
    if views == "dropout":  # two dropout passes of the anchor; the first is clustered
        pooled, clustered, first, second = {"anchor": e[0], "positive": e[1]}, e[0], e[0], e[1]
    elif augmentations == 2:  # the original is clustered, the two augmentations are contrasted
        pooled, clustered, first, second = {"anchor": e[0], "positive": e[1], "positive_2": e[2]}, e[0], e[1], e[2]
    else:  # no second augmentation: the original is the second view (the role's fallback)
        pooled, clustered, first, second = {"anchor": e[0], "positive": e[1], "positive_2": e[0]}, e[0], e[1], e[0]

    parts = loss.compute_loss(pooled)
    ours = parts["contrastive"] + parts["cluster"]
    theirs = reference_total(loss, clustered, first, second, weights)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-9)

    leaves = [*e, loss.centroids, *loss.head.parameters()]
    grads_ours = torch.autograd.grad(ours, leaves, allow_unused=True)
    grads_theirs = torch.autograd.grad(theirs, leaves, allow_unused=True)
    for mine, reference in zip(grads_ours, grads_theirs):
        if reference is None:
            assert mine is None or mine.abs().max() == 0
        else:
            assert torch.allclose(mine, reference, atol=1e-9, rtol=1e-7)


def test_float32_parity_within_1e_6(tiny_st):
    torch.manual_seed(0)
    loss = SCCLLoss(tiny_st, clusters=K)
    with torch.no_grad():
        loss.centroids.copy_(torch.randn(K, DIM))
    loss.centroids_source = "test"
    e1, e2 = torch.randn(ROWS, DIM), torch.randn(ROWS, DIM)
    parts = loss.compute_loss({"anchor": e1, "positive": e2})
    with torch.no_grad():
        q = reference_q(e1.double(), loss.centroids.double(), 1.0)
        contrastive = reference_pair_contrast(loss.head(e1).double(), loss.head(e2).double(), 0.5)
    assert parts["contrastive"].item() == pytest.approx(10 * contrastive.item(), abs=1e-5)  # ×10 of a 1e-6 error
    assert parts["cluster"].item() == pytest.approx(0.5 * reference_kl(q, reference_p(q)).item(), abs=1e-6)


def test_a_forward_pass_clusters_the_anchor_embedding_not_the_head(tiny_st):
    """Through the model (dropout off, so both passes agree): the cluster term is q of the pooled anchor."""
    loss = _seeded(tiny_st).float()
    tiny_st.eval()
    features = tiny_st.tokenize(["The cat sleeps.", "Stocks fell.", "It rains.", "A dog barks."])
    with torch.no_grad():
        parts = loss([features])
        e = tiny_st(dict(features))["sentence_embedding"]
        q = reference_q(e.double(), loss.centroids.double(), 1.0)
        contrastive = reference_pair_contrast(loss.head(e).double(), loss.head(e).double(), 0.5)
    assert parts["cluster"].item() == pytest.approx(0.5 * reference_kl(q, reference_p(q)).item(), abs=1e-6)
    assert parts["contrastive"].item() == pytest.approx(10 * contrastive.item(), abs=1e-5)


# ------------------------------------------------------------------ q, p and the KL by hand

def test_q_on_two_rows_by_hand():
    centroids = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    e = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.5, 0.0]])
    q = soft_assignment(e, centroids, alpha=1.0)
    # d² = (0, 1), (1, 0), (1/4, 1/4): kernels 1/(1 + d²) = (1, 1/2), (1/2, 1), (4/5, 4/5)
    assert torch.allclose(q, torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3], [0.5, 0.5]]))
    assert torch.allclose(q.sum(1), torch.ones(3))
    # α = 3: the kernel is (1 + d²/3)^(−2): row 1 = (1, (3/4)²) normalised
    q3 = soft_assignment(e[:1], centroids, alpha=3.0)
    assert torch.allclose(q3, torch.tensor([[1 / (1 + 9 / 16), (9 / 16) / (1 + 9 / 16)]]))


def test_p_is_sharper_than_q_and_divides_by_the_cluster_frequency():
    q = torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3]])
    p = target_distribution(q)
    # f = (1, 1): p ∝ q² = (4/9, 1/9) → (0.8, 0.2)
    assert torch.allclose(p, torch.tensor([[0.8, 0.2], [0.2, 0.8]]), atol=1e-7)
    assert (p.max(1).values > q.max(1).values).all()
    # an unequal batch: two rows favour cluster 0, so f_0 = 4/3 + 1/3 and its pull is divided down
    q = torch.tensor([[2 / 3, 1 / 3], [2 / 3, 1 / 3], [1 / 3, 2 / 3]])
    f = q.sum(0)
    row = torch.tensor([(2 / 3) ** 2 / f[0], (1 / 3) ** 2 / f[1]])
    assert torch.allclose(target_distribution(q)[0], row / row.sum(), atol=1e-7)
    assert not target_distribution(q.requires_grad_()).requires_grad


def test_the_divergence_by_hand_and_its_zero():
    q = torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3]])
    p = target_distribution(q)
    by_hand = 2 * (0.8 * math.log(0.8 / (2 / 3)) + 0.2 * math.log(0.2 / (1 / 3))) / 2
    assert cluster_divergence(q, p).item() == pytest.approx(by_hand, abs=1e-6)
    one_hot = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert cluster_divergence(one_hot, target_distribution(one_hot)).item() == pytest.approx(0.0, abs=1e-7)
    assert cluster_divergence(q, q).item() == pytest.approx(0.0, abs=1e-7)


def test_soft_assign_over_many_rows_is_the_same_in_blocks(monkeypatch):
    import augcse.losses.sccl as sccl

    torch.manual_seed(0)
    e, centroids = torch.randn(50, 8), torch.randn(4, 8)
    whole = soft_assignment(e, centroids)
    monkeypatch.setattr(sccl, "CHUNK_ELEMENTS", 7 * 4 * 8)  # blocks of 7 rows
    assert torch.equal(soft_assignment(e, centroids), whole)


# ------------------------------------------------------------------ the centroid file: refusals, one line each

def _write(path, value) -> str:
    np.save(path, value, allow_pickle=True)
    return str(path)


CENTROID_FILES = {
    "missing": (lambda d: str(d / "absent.npy"), "does not exist"),
    "a folder": (lambda d: str(d), "is a folder, not a file"),
    "too few rows": (lambda d: _write(d / "rows.npy", np.zeros((K - 1, DIM), np.float32)), f"shape ({K - 1}, {DIM})"),
    "one dimension": (lambda d: _write(d / "flat.npy", np.zeros(K * DIM, np.float32)), f"shape ({K * DIM},)"),
    "integers": (lambda d: _write(d / "ints.npy", np.zeros((K, DIM), np.int64)), "int64 array"),
    "NaN": (lambda d: _write(d / "nan.npy", np.full((K, DIM), np.nan, np.float32)), "NaN or infinite"),
    "infinite": (lambda d: _write(d / "inf.npy", np.full((K, DIM), np.inf, np.float32)), "NaN or infinite"),
    "pickled objects": (lambda d: _write(d / "objects.npy", np.array([{"a": 1}] * K, dtype=object)),
                        "cannot be read as a plain .npy array"),
    "an npz archive": (lambda d: (np.savez(d / "two.npz", a=np.zeros((K, DIM))), str(d / "two.npz"))[1],
                       "is an .npz archive"),
    "not numpy": (lambda d: ((d / "text.npy").write_text("0.1 0.2\n"), str(d / "text.npy"))[1],
                  "cannot be read as a plain .npy array"),
}


@pytest.mark.parametrize("case", CENTROID_FILES)
def test_a_bad_centroid_file_is_one_line_naming_it(case, tmp_path):
    from augcse.training.recipes.config import load_recipe

    make, words = CENTROID_FILES[case]
    path = make(tmp_path)
    with pytest.raises(RecipeError) as recipe_error:  # a recipe: refused as it loads, before any model
        load_recipe(None, "quickstart", ["loss.name=sccl", f"loss.params.clusters={K}", f"loss.params.centroids={path}"])
    with pytest.raises(RecipeError) as python_error:  # the Python API: the same field, the same words
        validate_loss("sccl", {"clusters": K, "centroids": path})
    for error in (recipe_error.value, python_error.value):
        message = str(error)
        assert "\n" not in message and words in message and path in message, message
        assert message.startswith("recipe key 'loss.params.centroids': centroids file "), message


def test_centroids_of_another_width_are_refused_by_the_constructor(tiny_st, tmp_path):
    path = _write(tmp_path / "wide.npy", np.zeros((K, DIM + 1), np.float32))
    with pytest.raises(ValueError, match=rf"^centroids file {path}: has {DIM + 1} columns but the model's embeddings "
                                         rf"have {DIM}; compute the centroids with the model being trained$"):
        SCCLLoss(tiny_st, clusters=K, centroids=path)


@pytest.mark.parametrize(("params", "words"), [
    ({"views": "contextual"}, "'loss.params.views': 'contextual' is not run by augcse: the authors' contextual "
                              "substitution rewrites texts with a masked language model"),
    ({"clusters": 1}, "'loss.params.clusters' must be >= 2, got 1"),
    ({"alpha": 0}, "'loss.params.alpha' must be > 0, got 0"),
    ({"eta": -1}, "'loss.params.eta' must be >= 0, got -1"),
    ({"views": "virtual"}, "'loss.params.views'"),
])
def test_bad_settings_are_one_line(params, words):
    with pytest.raises(RecipeError) as error:
        validate_loss("sccl", params)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_good_file_loads_as_the_starting_centroids(tiny_st, tmp_path):
    start = np.random.default_rng(0).normal(size=(K, DIM)).astype(np.float64)
    path = _write(tmp_path / "good.npy", start)
    loss = SCCLLoss(tiny_st, clusters=K, centroids=path)
    assert loss.centroids.dtype == torch.float32 and torch.allclose(loss.centroids, torch.from_numpy(start).float())
    assert loss.get_config_dict()["centroids"] == path


def test_the_authors_defaults_are_written_out():
    filled = validate_loss("sccl", {})
    assert {k: filled[k] for k in ("temperature", "head", "views", "contrastive_weight", "eta", "alpha")} == {
        "temperature": 0.5, "head": "sccl", "views": "dropout", "contrastive_weight": 10.0, "eta": 0.5, "alpha": 1.0}
    assert validate_loss("sccl", {"views": "explicit"}, {"anchor": None, "positive": None})["eta"] == 1.0
    assert validate_loss("sccl", {"views": "explicit", "eta": 2.0}, {"anchor": None, "positive": None})["eta"] == 2.0
    with pytest.raises(ValueError, match="reads the role 'positive' but the dataset has no such column"):
        validate_loss("sccl", {"views": "explicit"}, {"anchor": None})


# ------------------------------------------------------------------ the centroids train, save and resume

def test_the_centroids_get_a_gradient_and_move_under_the_optimiser(tiny_st):
    loss = _seeded(tiny_st).float()
    tiny_st.train()
    features = tiny_st.tokenize(["The cat sleeps.", "Stocks fell.", "It rains.", "A dog barks.", "Rain again."])
    before = loss.centroids.detach().clone()
    optimiser = torch.optim.Adam([{"params": tiny_st.parameters()},
                                  {"params": [loss.centroids, *loss.head.parameters()], "lr": 1e-3}], lr=1e-5)
    parts = loss([features])
    sum(parts.values()).backward()
    assert loss.centroids.grad is not None and loss.centroids.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in loss.head.parameters())
    optimiser.step()
    assert not torch.allclose(loss.centroids.detach(), before)


def test_the_documented_learning_rate_pattern_gives_centroids_and_head_their_own_rate(tiny_st, tmp_path):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    loss = _seeded(tiny_st).float()
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path), learning_rate=1e-5, report_to=[],
                                                learning_rate_mapping={"^(centroids|head\\.)": 1e-3})
    trainer = SentenceTransformerTrainer(model=tiny_st, args=args, loss=loss,
                                         train_dataset=Dataset.from_dict({"anchor": ["a b", "c d"]}))
    optimiser = trainer.create_optimizer()
    fast = [g for g in optimiser.param_groups if g["lr"] == 1e-3]
    ids = {id(p) for g in fast for p in g["params"]}
    assert ids == {id(loss.centroids), *(id(p) for p in loss.head.parameters())}


def test_the_loss_state_round_trip_keeps_the_centroids(tiny_st, tmp_path):
    from augcse.training.callbacks import restore_loss_state
    from augcse.training.rundir import LOSS_STATE

    trained = _seeded(tiny_st, seed=3).float()
    state = {k: v for k, v in trained.state_dict().items() if not k.startswith("model.")}  # as checkpoints save it
    assert "centroids" in state and any(k.startswith("head.") for k in state)
    torch.save(state, tmp_path / LOSS_STATE)
    fresh = SCCLLoss(tiny_st, clusters=K)
    assert fresh.centroids_source is None
    restore_loss_state(fresh, tmp_path)
    assert torch.equal(fresh.centroids, trained.centroids)
    assert all(torch.equal(a, b) for a, b in zip(fresh.head.parameters(), trained.head.parameters()))
    assert fresh.centroids_source == "restored from a checkpoint"


# ------------------------------------------------------------------ where the starting centroids come from

def test_kmeans_centroids_are_seeded_and_match_scikit_learn():
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(c, 0.1, size=(20, 4)) for c in (0.0, 3.0, 6.0)]).astype(np.float32)
    got = kmeans_centroids(points, 3, seed=7)
    assert got.dtype == np.float32 and got.shape == (3, 4)
    assert np.array_equal(got, kmeans_centroids(points, 3, seed=7))
    expected = KMeans(n_clusters=3, n_init=10, random_state=7).fit(points.astype(np.float64)).cluster_centers_
    assert np.allclose(got, expected, atol=1e-6)
    assert sorted(np.round(got[:, 0]).tolist()) == [0.0, 3.0, 6.0]
    with pytest.raises(ValueError, match=r"^K-means needs at least as many texts as clusters: 2 texts for 3"):
        kmeans_centroids(points[:2], 3, seed=0)


TEXTS = ["The cat sleeps.", "A kitten naps.", "Stocks fell today.", "Markets dropped.", "It rains.", "Snow falls."]


def test_from_texts_starts_from_kmeans_of_the_starting_embeddings(tiny_st):
    loss = LOSSES["sccl"].from_texts(tiny_st, TEXTS, clusters=K, seed=4)
    embeddings = tiny_st.encode(TEXTS, convert_to_numpy=True)
    assert np.allclose(loss.centroids.detach().numpy(), kmeans_centroids(embeddings, K, 4), atol=1e-6)
    q = loss.soft_assign(torch.from_numpy(embeddings))
    assert q.shape == (len(TEXTS), K) and torch.allclose(q.sum(1), torch.ones(len(TEXTS)))
    assert loss.get_config_dict()["centroids"] == f"K-means of {len(TEXTS)} texts (seed 4)"


def test_bind_dataset_computes_the_centroids_only_when_none_were_given(tiny_st, tmp_path):
    from datasets import Dataset

    train = Dataset.from_dict({"anchor": TEXTS})
    loss = SCCLLoss(tiny_st, clusters=K, kmeans_seed=1)
    with pytest.raises(ValueError, match="^SCCLLoss has no starting centroids"):
        loss.compute_loss({"anchor": torch.randn(4, DIM), "positive": torch.randn(4, DIM)})
    bind_dataset(loss, train)
    expected = kmeans_centroids(tiny_st.encode(TEXTS, convert_to_numpy=True), K, 1)
    assert np.allclose(loss.centroids.detach().numpy(), expected, atol=1e-6)
    given = np.full((K, DIM), 0.25, np.float32)
    loss = SCCLLoss(tiny_st, clusters=K, centroids=_write(tmp_path / "given.npy", given))
    bind_dataset(loss, train)
    assert np.array_equal(loss.centroids.detach().numpy(), given)


def test_explicit_views_read_the_augmentation_columns_by_name(tiny_st):
    from datasets import Dataset

    loss = _seeded(tiny_st, views="explicit").float()
    loss.bind(["anchor", "positive", "positive_2"])
    assert loss.sources() == {"anchor": ["anchor"], "positive": ["positive"], "positive_2": ["positive_2"]}
    loss.bind(["anchor", "positive"])
    assert loss.sources()["positive_2"] == ["anchor"]
    with pytest.raises(ValueError, match="column 'negative' is not a role"):
        bind_dataset(loss, Dataset.from_dict({"anchor": ["a"], "positive": ["b"], "negative": ["c"]}))


@pytest.mark.parametrize(("views", "columns"), [("dropout", ["anchor"]), ("explicit", ["anchor", "positive"]),
                                                ("explicit", ["anchor", "positive", "positive_2"])])
def test_gradient_caching_gives_the_whole_batch_gradient(tiny_st, views, columns):
    """Mini-batches of 2 with cached gradients: the same components and gradients as the whole batch at once."""
    tiny_st.double()
    columns_text = {"anchor": TEXTS, "positive": TEXTS[::-1], "positive_2": TEXTS[1:] + TEXTS[:1]}
    results = []
    for mini_batch_size in (None, 2):
        loss = _seeded(tiny_st, views=views, mini_batch_size=mini_batch_size)
        loss.bind(columns)
        tiny_st.zero_grad()
        torch.manual_seed(1)
        parts = loss([tiny_st.tokenize(columns_text[c]) for c in columns])
        sum(parts.values()).backward()
        grads = [p.grad.clone() for p in [*tiny_st.parameters(), loss.centroids] if p.grad is not None]
        results.append(({k: v.item() for k, v in parts.items()}, grads))
    (whole, whole_grads), (cached, cached_grads) = results
    assert cached == pytest.approx(whole, rel=1e-10)
    assert len(whole_grads) == len(cached_grads) > 1
    assert all(torch.allclose(a, b, rtol=1e-8, atol=1e-12) for a, b in zip(whole_grads, cached_grads))


NEIGHBOUR_VIEW = {"name": "cards", "switch_case": False, "k": 2, "negative_column": "positive", "min_words": 1}


def test_neighbour_positives_as_in_clnn(tiny_st, tmp_path):
    """The cards view writes each anchor's positive as one of its top-2 neighbours under the starting model, never
    itself; SCCL's explicit views contrast it with the anchor and cluster the anchor."""
    from datasets import Dataset

    from augcse.text.retrieval import mean_pooled
    from augcse.text.views import ViewContext, build_views, produced_columns

    produced = produced_columns([NEIGHBOUR_VIEW])
    assert list(produced) == ["anchor", "positive"]
    validate_loss("sccl", {"views": "explicit", "clusters": 2}, produced)
    vectors = mean_pooled(tiny_st, TEXTS)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    top = {TEXTS[i]: {TEXTS[j] for j in np.argsort(-similarity[i])[:2]} for i in range(len(TEXTS))}
    train = build_views(Dataset.from_dict({"text": TEXTS}), [NEIGHBOUR_VIEW],
                        ViewContext(model=tiny_st, seed=3, cache_dir=tmp_path))
    rows = train[:]
    assert rows["anchor"] == TEXTS
    assert all(p in top[a] and p != a for a, p in zip(rows["anchor"], rows["positive"]))

    loss = SCCLLoss.from_texts(tiny_st, TEXTS, clusters=2, views="explicit")
    bind_dataset(loss, train)
    assert loss.sources() == {"anchor": ["anchor"], "positive": ["positive"], "positive_2": ["anchor"]}
    parts = loss([tiny_st.tokenize(rows["anchor"]), tiny_st.tokenize(rows["positive"])])
    assert set(parts) == {"contrastive", "cluster"} and all(torch.isfinite(v) and v > 0 for v in parts.values())
