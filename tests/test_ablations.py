"""Every ablation row of docs/ABLATIONS.md: its recipe and overrides load, build their views, bind and train
two steps on the tiny model (the trainer itself is exercised by test_recipes_methods.py), and the loss they
compute on one batch equals a hand computation of the objective the paper's row names (cross-entropy over
cosine similarities written out row by row, the discriminator's per-class BCE, the reversal factor and
VaSCL's stop-gradient on the gradients).

The check runs with dropout off (``eval``), so a dropout copy of the anchor is the anchor's embedding; every
other column is a different text, so a loss that read a column in another role would not match.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from augcse.training.recipes.config import load_recipe

DOC = Path(__file__).resolve().parents[1] / "docs" / "ABLATIONS.md"
TAU = 0.05
SENTENCES = [
    "The cat sat on the mat .", "He can swim very well .", "It rained all day in Paris .",
    "Birds sing at dawn in the spring .", "She is not happy with the result .", "The company was founded in 1990 .",
    "They will arrive tomorrow morning .", "I do not think it will work .", "A man is playing a guitar .",
    "The river flows into the sea .", "Stocks fell sharply on Monday .", "The museum opens at nine .",
    # adjectives with antonyms, so the single-augmentation rows keep two batches after dropping unchanged rows
    "The old man bought a cheap car .", "A tall woman reads a long book .", "The young boy kicked the big ball .",
    "The hot soup warmed the cold children .", "The big house has a small garden .",
    "A good idea came after a bad day .", "The fast train passed the slow bus .", "The dark room had a bright lamp .",
    "A rich king met a poor farmer .", "The wet dog found a dry towel .",
]
NLI = "nli_for_simcse.csv"  # SimCSE's NLI triplets (sent0, sent1, hard_neg); a small stand-in here
SUPERVISED = ["training.per_device_train_batch_size=512", "training.learning_rate=5e-5", "training.num_train_epochs=3"]


@dataclass(frozen=True)
class Objective:
    """What a row trains, as the paper states it. Queries are always the anchors.

    ``positive``: the column whose embedding is row i's positive (``anchor``: its dropout copy); every
    row's positive is an in-batch negative of the others. ``shared``: columns every row sees as negatives
    (``masked``: a key whose text is the row's own anchor is left out). ``own``: a column seen only by its
    own row, with a logit offset. ``discriminator``: ``type`` or ``bool`` target, weight λ and reversal α.
    ``vascl``: instance NT-Xent + neighbourhood loss; ``detach``: no neighbourhood gradient to the encoder.
    """

    positive: str = "anchor"
    shared: tuple[str, ...] = ()
    masked: bool = False
    own: tuple[str, float] | None = None
    symmetric: bool = False
    discriminator: str | None = None
    weight: float = 0.0
    alpha: float = -1.0
    vascl: bool = False
    detach: bool = True


AUGCSE = Objective(symmetric=True, discriminator="type", weight=0.005)  # dropout positive, K-way, λ 5e-3, α −1
SDA = Objective(positive="positive", own=("negation", -0.5 / TAU))       # δ 0.5
CARDS = Objective(positive="positive", shared=("retrieved",), masked=True)
VASCL = Objective(vascl=True)

ROWS: dict[str, tuple[str, list[str], Objective]] = {
    # AugCSE, Table 6 (dev) and §3.1 / Table 1
    "augcse-t6-augcse": ("augcse-bert-base", [], AUGCSE),
    "augcse-t6-bool": ("augcse-bert-base", ["loss.params.variant=bool"],
                       Objective(symmetric=True, discriminator="bool", weight=0.005)),
    "augcse-t6-positive": ("augcse-bert-base", ["loss.params.variant=positive"],
                           Objective(positive="augmented", symmetric=True, discriminator="type", weight=0.005)),
    "augcse-t6-no-discriminator": ("augcse-bert-base", ["loss.params.variant=none", "data.views[0].label_column=null"],
                                   Objective(positive="augmented", symmetric=True)),
    "augcse-t1-negative-subject-object-switch": (
        "augcse-bert-base", ["loss.params.variant=negative", "loss.params.symmetric=false",
                             "data.views[0].augmentations=[SentenceSubjectObjectSwitch]",
                             "data.views[0].drop_unchanged=true", "data.views[0].label_column=null"],
        Objective(own=("augmented", 0.0))),
    "augcse-t1-negative-adjective-antonyms": (
        "augcse-bert-base", ["loss.params.variant=negative", "loss.params.symmetric=false",
                             "data.views[0].augmentations=[SentenceAdjectivesAntonymsSwitch]",
                             "data.views[0].drop_unchanged=true", "data.views[0].label_column=null"],
        Objective(own=("augmented", 0.0))),
    "augcse-f6-single-positive": (
        "augcse-bert-base", ["loss.params.variant=none", "data.views[0].augmentations=[RandomDeletion]",
                             "data.views[0].params={RandomDeletion: {p: 0.6}}", "data.views[0].drop_unchanged=true",
                             "data.views[0].label_column=null"],
        Objective(positive="augmented", symmetric=True)),
    # AugCSE, Table 7 (α), Table 8 (#augs), Table 9 (no LM-based augmentations)
    **{f"augcse-t7-alpha{a:+g}": ("augcse-bert-base", [f"loss.params.grl_alpha={a:g}"],
                                  Objective(symmetric=True, discriminator="type", weight=0.005, alpha=float(a)))
       for a in (100, 10, 1, -10, -100)},
    **{f"augcse-t8-{s}": ("augcse-bert-base", [f"data.views[0].augmentations={s}"], AUGCSE)
       for s in ("4-aug", "12-aug", "16-aug")},
    **{f"augcse-t9-{s}": ("augcse-bert-base", [f"data.views[0].augmentations={s}"], AUGCSE)
       for s in ("8-2-aug", "12-2-aug", "16-2-aug")},
    # AugCSE, Table 2 / 14: NLI pairs with supervised SimCSE
    "augcse-t2-supervised-simcse": (
        "simcse-bert-base", [*SUPERVISED, f"data.views=[{{name: columns, path: {NLI}, "
                             "columns: {anchor: sent0, positive: sent1, negative: hard_neg}}]"],
        Objective(positive="positive", shared=("negative",))),
    "augcse-t2-no-contradiction": (
        "simcse-bert-base", [*SUPERVISED, f"data.views=[{{name: columns, path: {NLI}, "
                             "columns: {anchor: sent0, positive: sent1}}]"],
        Objective(positive="positive")),
    "augcse-t2-contradiction-as-positive": (
        "simcse-bert-base", [*SUPERVISED, f"data.views=[{{name: columns, path: {NLI}, "
                             "columns: {anchor: sent0, positive: hard_neg}}]"],
        Objective(positive="positive")),
    "augcse-t2-contradiction-positive-entailment-negative": (
        "simcse-bert-base", [*SUPERVISED, f"data.views=[{{name: columns, path: {NLI}, "
                             "columns: {anchor: sent0, positive: hard_neg, negative: sent1}}]"],
        Objective(positive="positive", shared=("negative",))),
    # SDA, Table 4 (single rules and the ensemble), Fig. 5, Table 6, Table 8, paper vs code rules
    **{f"sda-t4-{r.lower()}-{b}": (f"sda-{b}", [f"data.views[0].positive={r}"], SDA)
       for b in ("bert-base", "roberta-base") for r in ("PI", "MV", "DN")},
    "sda-t4-ensemble-roberta-base": ("sda-roberta-base", [], SDA),
    "sda-f5b-dn-margin-0.3": ("sda-roberta-base", ["data.views[0].positive=DN", "loss.params.margin=0.3"],
                              Objective(positive="positive", own=("negation", -0.3 / TAU))),
    "sda-f5b-margin": ("sda-roberta-base", ["data.views[0].positive=MV", "loss.params.margin=0.1"],
                       Objective(positive="positive", own=("negation", -0.1 / TAU))),
    "sda-f5a-proportion": ("sda-roberta-base", ["data.views[0].positive=MV", "data.views[0].proportion=0.5"], SDA),
    "sda-t6-mv-without-negation": ("sda-roberta-base", ["data.views[0].positive=MV", "data.views[0].negation=false"],
                                   Objective(positive="positive")),
    "sda-t6-negation-only": ("sda-roberta-base", ["data.views[0].positive=null"],
                             Objective(own=("negation", -0.5 / TAU))),
    "sda-t6-simcse": ("simcse-roberta-base", [], Objective()),
    "sda-paper-rules": ("sda-roberta-base", ["data.views[0].positive=MV", "data.views[0].variant=paper"], SDA),
    "sda-negations-of-all-rows": ("sda-roberta-base", ["data.views[0].positive=MV", "loss.params.neg_block=all"],
                                  Objective(positive="positive", shared=("negation",), own=("negation", -0.5 / TAU))),
    **{f"sda-t8-{r.lower()}-without-negation": ("sda-bert-base", [f"data.views[0].positive={r}",
                                                                "data.views[0].negation=false"],
                                                Objective(positive="positive")) for r in ("PI", "MV", "DN")},
    "sda-t9-pi-without-negation": ("sda-roberta-base", ["data.views[0].positive=PI", "data.views[0].negation=false"],
                                   Objective(positive="positive")),
    **{f"sda-t8-{name.lower()}": (
        "sda-bert-base", [f"data.views=[{{name: augcse_sample, augmentations: [{name}], column: positive, "
                          f"label_column: null{params}}}]"], Objective(positive="positive"))
       for name, params in (("RandomCrop", ", params: {RandomCrop: {p: 0.1}}"),
                            ("RandomDeletion", ", params: {RandomDeletion: {p: 0.1}}"),
                            ("SynonymSubstitution", ""), ("WordRepetition", ""))},
    # CARDS, Table 3, Table 5, Fig. 2-3, the large setting, the code's symmetric flag
    "cards-t3-cards": ("cards-roberta-base", [], CARDS),
    "cards-t3-switch-case-only": ("cards-roberta-base", ["data.views[0].retrieve=false"],
                                  Objective(positive="positive")),
    "cards-t3-retrieval-only": ("cards-roberta-base", ["data.views[0].switch_case=false"],
                                Objective(shared=("retrieved",), masked=True)),
    "cards-t5-substitution": ("cards-roberta-base", ["data.views[0].retrieve=false", "data.views[0].mode=substitution"],
                              Objective(positive="positive")),
    "cards-f3-r-top": ("cards-roberta-base", ["data.views[0].sampling=R_top"], CARDS),
    "cards-f3-d-uniform": ("cards-roberta-base", ["data.views[0].sampling=D_uniform"], CARDS),
    "cards-f3-s2": ("cards-roberta-base", ["data.views[0].s=2"],
                    Objective(positive="positive", shared=("retrieved", "retrieved_2"), masked=True)),
    "cards-f2a-p": ("cards-roberta-base", ["data.views[0].p=0.15"], CARDS),
    "cards-f2b-k": ("cards-roberta-base", ["data.views[0].k=8"], CARDS),
    "cards-t3-large": ("cards-roberta-base", ["model.backbone=roberta-large", "data.views[0].variant=v1",
                                              "data.views[0].p=0.1", "data.views[0].k=8",
                                              "training.learning_rate=7.5e-6"], CARDS),
    "cards-symmetric": ("cards-roberta-base", ["loss.params.symmetric=true", "loss.params.mask_own_text=false"],
                        Objective(positive="positive", shared=("retrieved",), symmetric=True)),
    # VaSCL, Table 1 and the stop-gradient of the released code
    "vascl-t1-roberta-base": ("vascl-roberta-base", [], VASCL),
    "vascl-eq6-end-to-end": ("vascl-roberta-base", ["loss.params.detach=false"], Objective(vascl=True, detach=False)),
    "vascl-clean-gradient": ("vascl-roberta-base", ["loss.params.clean_gradient=true"], VASCL),
    "vascl-t1-roberta-large": ("vascl-roberta-base", ["model.backbone=roberta-large", "loss.params.eps=30"], VASCL),
}

# offline: 8-Aug's two LM-based rewrites need generation models; train with the rest of each set (Table 9's n-2)
OFFLINE_SETS = {"4-aug": "4-1-aug", "8-aug": "8-2-aug", "12-aug": "12-2-aug", "16-aug": "16-2-aug"}


def doc_rows() -> dict[str, tuple[str, list[str]]]:
    """``id → (recipe, overrides)`` from the table in docs/ABLATIONS.md."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and re.fullmatch(r"`[a-z0-9.+-]+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[3].strip("`"), re.findall(r"`([^`]+)`", cells[4]))
    return rows


def test_doc_table_lists_every_row_with_its_overrides():
    assert doc_rows() == {name: (recipe, overrides) for name, (recipe, overrides, _) in ROWS.items()}


# --------------------------------------------------------------------------- by hand

def lowered(texts: list[str]) -> list[str]:
    return [t.lower() for t in texts]  # the tiny model's tokenizer is uncased


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a.double().unsqueeze(0), b.double().unsqueeze(0)))


def nll(target: float, row: list[float]) -> float:
    """−log softmax: the target logit against every visible logit of the row."""
    top = max(row)
    return -(target - top - math.log(sum(math.exp(x - top) for x in row)))


def contrastive(z: dict[str, torch.Tensor], texts: dict[str, list[str]], obj: Objective) -> float:
    """InfoNCE of the anchors, written out row by row (and the reverse direction when symmetric)."""
    anchor, positive = z["anchor"], z[obj.positive]
    rows = anchor.size(0)
    total = 0.0
    for i in range(rows):
        row = [cos(anchor[i], positive[j]) / TAU for j in range(rows)]
        for column in obj.shared:
            own_offset = obj.own[1] if obj.own and obj.own[0] == column else 0.0
            row += [cos(anchor[i], z[column][j]) / TAU + (own_offset if j == i else 0.0) for j in range(rows)
                    if not (obj.masked and texts[column][j] == texts["anchor"][i])]
        if obj.own and obj.own[0] not in obj.shared:
            row.append(cos(anchor[i], z[obj.own[0]][i]) / TAU + obj.own[1])
        total += nll(row[i], row) / rows
    if not obj.symmetric:
        return total
    back = sum(nll(cos(positive[i], anchor[i]) / TAU, [cos(positive[i], anchor[j]) / TAU for j in range(rows)])
               for i in range(rows)) / rows
    return (total + back) / 2


def bce(logits: torch.Tensor, target: list[int]) -> float:
    """Paper Eq. 2: −(1/K) Σ_k [y_k log σ(d_k) + (1−y_k) log(1−σ(d_k))], averaged over the batch."""
    rows, classes = logits.shape
    total = 0.0
    for i in range(rows):
        for k in range(classes):
            p = 1 / (1 + math.exp(-float(logits[i, k])))
            total -= (math.log(p) if k == target[i] else math.log(1 - p)) / (rows * classes)
    return total


def nt_xent(z1: torch.Tensor, z2: torch.Tensor) -> float:
    """VaSCL Eq. 1 over 2B rows: the partner view positive, both views of every other row negative."""
    views, rows = [z1, z2], z1.size(0)
    total = 0.0
    for v in (0, 1):
        for i in range(rows):
            row = [cos(views[v][i], views[1 - v][j]) / TAU for j in range(rows)]
            row += [cos(views[v][i], views[v][j]) / TAU for j in range(rows) if j != i]
            total += nll(row[i], row) / (2 * rows)
    return total


def neighbourhood(clean: torch.Tensor, virtual: torch.Tensor, e: torch.Tensor, k: int) -> float:
    """VaSCL Eq. 5: each of z_i, z_i* against its partner and the K neighbours' clean and virtual views."""
    rows = e.size(0)
    total = 0.0
    for i in range(rows):
        dots = [(float(e[i] @ e[j]), j) for j in range(rows) if j != i]
        near = [j for _, j in sorted(dots, reverse=True)[:k]]
        for query, partner in ((clean, virtual), (virtual, clean)):
            row = [cos(query[i], partner[i]) / TAU]
            row += [cos(query[i], clean[j]) / TAU for j in near] + [cos(query[i], virtual[j]) / TAU for j in near]
            total += nll(row[0], row) / (2 * rows)
    return total


# --------------------------------------------------------------------------- training and checking

@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict:
    """The NLI stand-in, one augmentation/retrieval cache for every row, the shared model."""
    root = tmp_path_factory.mktemp("ablations")
    (root / NLI).write_text("sent0,sent1,hard_neg\n" + "".join(
        f'"{s}","{s.replace(" .", " indeed .")}","{SENTENCES[(i + 5) % len(SENTENCES)]}"\n'
        for i, s in enumerate(SENTENCES)))
    return {"root": root, "models": {}}


def model_for(workspace: dict, pooler: str, tiny_model_dir: Path):
    """The tiny model, shared by the rows; mean pooling for all (a random tiny model's CLS vectors are nearly
    equal for every sentence, which would hide a column read in the wrong role)."""
    from augcse.models.poolers import build_sentence_transformer

    if pooler not in workspace["models"]:
        torch.manual_seed(0)
        workspace["models"][pooler] = build_sentence_transformer(str(tiny_model_dir), pooler, 32)
    return workspace["models"][pooler]


def offline_overrides(recipe: str, overrides: list[str], root: Path) -> list[str]:
    """Run the row here: the NLI stand-in, one process per view, the sets without their LM-based rewrites."""
    from augcse.training.recipes.config import RECIPE_DIR
    import yaml

    views = yaml.safe_load((RECIPE_DIR / f"{recipe}.yaml").read_text())["data"].get("views") or []
    extra = []
    for text in overrides:
        if text.startswith("data.views="):
            views = yaml.safe_load(text.split("=", 1)[1])
    for key, value in (o.split("=", 1) for o in overrides):
        if key == "data.views[0].augmentations":
            views = [{**views[0], "augmentations": yaml.safe_load(value)}]
    if views and views[0].get("name") == "columns":
        extra.append(f"data.views[0].path={root / NLI}")
    if views and views[0].get("name") in ("sda", "augcse_sample"):
        extra.append("data.views[0].n_process=1")
        sets = views[0].get("augmentations")
        if isinstance(sets, str) and sets in OFFLINE_SETS:
            extra.append(f"data.views[0].augmentations={OFFLINE_SETS[sets]}")
    return extra


def train_two_steps(model, loss, dataset) -> None:
    """Two optimizer steps on the first two batches of 4, the dataset's columns in order as the trainer passes them."""
    optimizer = torch.optim.AdamW([p for p in loss.parameters() if p.requires_grad], lr=1e-3)
    loss.train()
    text = [c for c in dataset.column_names if c != "label"]
    assert len(dataset) >= 8
    for start in (0, 4):
        batch = dataset[start:start + 4]
        labels = torch.tensor(batch["label"]) if "label" in batch else None
        parts = loss([model.preprocess(batch[c]) for c in text], labels)
        total = sum(parts.values())
        assert torch.isfinite(total)
        optimizer.zero_grad()
        total.backward()
        optimizer.step()


@pytest.mark.parametrize("row", list(ROWS))
def test_row_trains_the_objective_it_names(row, workspace, tiny_model_dir):
    from augcse.losses import bind_dataset
    from augcse.training.build import build_loss
    from augcse.text.views import ViewContext, build_views
    from datasets import Dataset

    recipe_name, overrides, obj = ROWS[row]
    root = workspace["root"]
    recipe = load_recipe(None, recipe_name, [*overrides, *offline_overrides(recipe_name, overrides, root),
                                              f"output_dir={root / 'runs'}"])
    model = model_for(workspace, "avg", tiny_model_dir)
    torch.manual_seed(1)
    loss = build_loss(recipe, model)
    corpus = Dataset.from_dict({"text": SENTENCES})
    dataset = build_views(corpus, recipe.data.views, ViewContext(model=model, seed=recipe.seed, data_dir=root,
                                                                 cache_dir=root / "cache"))
    bind_dataset(loss, dataset)
    train_two_steps(model, loss, dataset)

    loss.eval()  # dropout off: the dropout copy of the anchor is the anchor
    batch = dataset[:4]
    texts = {c: batch[c] for c in dataset.column_names if c != "label"}
    features = {c: model.preprocess(t) for c, t in texts.items()}
    labels = torch.tensor(batch["label"]) if "label" in batch else None
    torch.manual_seed(3)
    got = loss([features[c] for c in texts], labels)
    with torch.no_grad():
        pooled = {c: model(dict(f))["sentence_embedding"] for c, f in features.items()}
        z = {c: loss.head(e) for c, e in pooled.items()}

    if obj.vascl:
        check_vascl(loss, got, pooled, obj)
        return
    expected = contrastive(z, texts, obj)
    assert got["contrastive"].item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    for other in texts:  # the check tells the columns apart: another column read as the positive is another value
        if other != obj.positive and lowered(texts[other]) != lowered(texts[obj.positive]):
            assert contrastive(z, texts, replace(obj, positive=other)) != pytest.approx(expected, rel=1e-3), other
    if obj.discriminator is None:
        assert "discriminator" not in got
        return
    check_discriminator(loss, got, pooled, labels, obj)


def check_discriminator(loss, got: dict, pooled: dict, labels: torch.Tensor, obj: Objective) -> None:
    """λ·BCE by hand on [z_anchor; z_augmented]; the gradient reaching the encoder side is α times the plain one."""
    size = loss.num_labels
    target = [int(y) for y in labels] if obj.discriminator == "type" else [int(y != size - 1) for y in labels]
    e_anchor = pooled["anchor"].clone().requires_grad_(True)
    e_aug = pooled["augmented"].clone().requires_grad_(True)
    logits = loss.discriminator(torch.cat([loss.head(e_anchor), loss.head(e_aug)], dim=-1))  # no reversal layer
    assert logits.size(1) == (size if obj.discriminator == "type" else 2)
    assert got["discriminator"].item() == pytest.approx(obj.weight * bce(logits.detach(), target), rel=1e-5, abs=1e-7)
    plain = torch.autograd.grad(F.binary_cross_entropy_with_logits(
        logits, F.one_hot(torch.tensor(target), logits.size(1)).to(logits.dtype)), [e_anchor, e_aug])
    e_anchor2 = pooled["anchor"].clone().requires_grad_(True)
    e_aug2 = pooled["augmented"].clone().requires_grad_(True)
    reversed_ = torch.autograd.grad(loss.discriminate(loss.head(e_anchor2), loss.head(e_aug2), labels),
                                    [e_anchor2, e_aug2])
    for r, p in zip(reversed_, plain):
        torch.testing.assert_close(r / obj.alpha, p, rtol=1e-4, atol=1e-4 * float(p.abs().max()))


def check_vascl(loss, got: dict, pooled: dict, obj: Objective) -> None:
    """Instance NT-Xent and the neighbourhood loss by hand (the virtual step drawn alike); the stop-gradient."""
    e1, e2 = pooled["anchor"], pooled["anchor"]
    z1, z2 = loss.head(e1).detach(), loss.head(e2).detach()
    assert got["instance"].item() == pytest.approx(nt_xent(z1, z2), rel=1e-5, abs=1e-6)
    from augcse.losses.vascl import nearest_neighbours

    k = min(loss.topk, e1.size(0) - 1)
    torch.manual_seed(3)
    delta = loss.virtual_perturbation(e1, nearest_neighbours(e1, loss.topk))
    assert float(delta.norm(dim=-1).min()) == pytest.approx(loss.eps, rel=1e-5)
    with torch.no_grad():
        clean, virtual = loss.head(e1), loss.head(e1 + delta)
    assert got["neighbourhood"].item() == pytest.approx(neighbourhood(clean, virtual, e1, k), rel=1e-4, abs=1e-6)
    encoder = [p for p in loss.model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(got["neighbourhood"], encoder, allow_unused=True)
    reaches = any(g is not None and bool(g.abs().sum() > 0) for g in grads)
    assert reaches is not obj.detach
