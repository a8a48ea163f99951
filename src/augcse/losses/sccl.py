"""SCCL (Zhang et al., NAACL 2021): instance-wise contrastive learning plus a clustering term on K centroids.

Instance discrimination alone pushes texts of one topic apart; SCCL adds a term that pulls each text towards
the centroid it is already closest to, sharpened so that confident assignments grow more confident (the DEC
target of Xie et al., 2016). The centroids are a train-only parameter of the loss, started by K-means on the
starting embeddings, and move with their own learning rate.

Held to the authors' code (amazon-science/sccl: ``training.py``, ``models/Transformers.py``,
``learner/contrastive_utils.py``, ``learner/cluster_utils.py``), which differs from a plain reading of the
paper in three places stated where they act: the instance-wise term carries the weight the scripts call
``--eta`` (10) and the clustering term 0.5 (virtual) or 1 (explicit); the clustering term reads the encoder's
pooled embedding of the *original* text (the first dropout pass in virtual mode), never the head's output;
in explicit mode the two augmentations are contrasted with each other and the original is only clustered.

The clustering term reads the sentence embedding as the model computes it. The authors' is BERT's mean pooling,
unnormalised; a model that ends in a ``Normalize`` module (all-MiniLM-L6-v2 as published) gives unit vectors, so
every squared distance to a centroid lies near [0, 4] and q starts flatter than theirs (p still sharpens it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augcse.core.loss_parameters import SCCLParameters, read_centroids
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import nt_xent

LOG_EPS = 1e-8  # added to q before its log in the KL (the authors' trainer)
FREQUENCY_EPS = 1e-9  # added to the cluster frequency f_k (the authors' target_distribution)
CHUNK_ELEMENTS = 1 << 24  # rows × K × d of one block of soft_assignment, so q over a whole corpus fits in memory


def soft_assignment(embeddings: Tensor, centroids: Tensor, alpha: float = 1.0) -> Tensor:
    """Student's t soft assignment ``q`` (N, K): q_ik ∝ (1 + ‖e_i − μ_k‖²/α)^(−(α+1)/2), each row summing to 1.

    Computed from the differences themselves (not ‖e‖² − 2e·μ + ‖μ‖², which cancels badly near a centroid),
    a block of rows at a time.
    """
    rows = max(1, CHUNK_ELEMENTS // max(1, centroids.numel()))
    blocks = []
    for block in embeddings.split(rows):
        squared = (block.unsqueeze(1) - centroids).pow(2).sum(-1)
        kernel = (1.0 + squared / alpha).pow(-(alpha + 1.0) / 2.0)
        blocks.append(kernel / kernel.sum(1, keepdim=True))
    return torch.cat(blocks) if blocks else embeddings.new_zeros((0, centroids.size(0)))


def target_distribution(q: Tensor) -> Tensor:
    """The sharpened target ``p`` (detached): p_ik ∝ q_ik² / f_k with f_k = Σ_i q_ik, the batch's cluster frequency.

    Squaring favours confident assignments; dividing by f keeps a large cluster from absorbing the others.
    """
    with torch.no_grad():
        weight = q.pow(2) / (q.sum(0) + FREQUENCY_EPS)
        return weight / weight.sum(1, keepdim=True)


def cluster_divergence(q: Tensor, p: Tensor) -> Tensor:
    """KL(p ‖ q) summed over rows and clusters, divided by the number of rows (0 · log 0 counts 0)."""
    return F.kl_div((q + LOG_EPS).log(), p, reduction="sum") / q.size(0)


def kmeans_centroids(embeddings: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """K-means centroids (K, d) of ``embeddings``, float32: scikit-learn's KMeans, 10 seeded restarts (the
    library's long-standing default, which the authors' ``KMeans(n_clusters)`` ran with)."""
    from sklearn.cluster import KMeans

    if len(embeddings) < clusters:
        raise ValueError(f"K-means needs at least as many texts as clusters: {len(embeddings)} texts for "
                         f"{clusters} clusters; give more texts or fewer clusters")
    model = KMeans(n_clusters=clusters, n_init=10, random_state=seed).fit(np.asarray(embeddings, dtype=np.float64))
    return model.cluster_centers_.astype(np.float32)


class SCCLLoss(ContrastiveLoss):
    """SCCL: NT-Xent between two views through a train-only head, plus KL(p‖q) of the soft cluster assignment::

        L = w · (1/2N) Σ_i [ℓ(z_i, z_i') + ℓ(z_i', z_i)]  +  η · (1/N) Σ_i Σ_k p_ik log(p_ik / q_ik)

    ``z = normalise(head(e))``; ℓ is the softmax of the positive against the 2N − 2 other views of the batch
    (the authors' ``PairConLoss``); ``q`` is the Student's t assignment of the original text's pooled embedding
    to the K centroids and ``p`` its sharpened target (detached). The components are logged as
    ``contrastive`` and ``cluster``, each already weighted.

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        clusters: K, the number of clusters (≥ 2; the authors' default 8).
        centroids: a float ``.npy`` of shape (K, d), the starting centroids (K-means of the starting
            embeddings), read with ``allow_pickle=False``; ``None``: K-means of the training texts' starting
            embeddings, computed before the first step (:meth:`prepare`), or given by :meth:`from_texts`.
        temperature: τ of the instance-wise softmax (0.5 in the authors' scripts).
        head: train-only contrast head; ``sccl`` is Linear(d,d) → ReLU → Linear(d,128), with biases, as the
            authors'. The centroids and the head are the loss's parameters ``centroids`` and ``head.…``: give
            them their own learning rate (the authors: 100 × the encoder's) with
            ``training.learning_rate_mapping: {"^(centroids|head\\\\.)": 1.0e-3}``.
        views: ``dropout`` (the authors' "virtual"): two dropout passes of the anchor in one merged forward,
            the clustering term on the first. ``explicit``: the columns ``positive`` and ``positive_2`` (two
            augmentations) are contrasted and ``anchor`` (the original) is clustered; without ``positive_2``
            the anchor is the second view. The authors' explicit runs use contextual substitution, which needs
            a masked language model (none is stored with augcse) and is not run inside the loss:
            ``views: contextual`` is refused in one line saying how to build the columns with a view instead.
        contrastive_weight: the instance-wise term's weight (the authors' ``--eta``, 10 in their scripts).
        eta: η, the clustering term's weight; left out, the authors' trainer's: 0.5 (dropout), 1.0 (explicit).
        alpha: degrees of freedom of the Student's t kernel (1).
        kmeans_seed: K-means' seed when the centroids are computed here.
        gather_across_devices: gather the instance-wise negatives across processes (with gradients); the
            clustering term's frequency f is each process's own batch, as on the authors' one GPU.

    References:
        - Zhang, Nan, Wei, Li, Zhu, McKeown, Nallapati, Arnold, Xiang. Supporting Clustering with Contrastive
          Learning. NAACL 2021 (code: github.com/amazon-science/sccl).
        - Xie, Girshick, Farhadi. Unsupervised Deep Embedding for Clustering Analysis. ICML 2016 (q and p).
        - Zhang, Zhang, Zhan, Wu, Lam. New Intent Discovery with Pre-training and Contrastive Learning. ACL 2022
          (CLNN: a text's positive is one of its top-k neighbours under the starting embeddings).

    Inputs:
        +------------------------------------+----------+--------+
        | Texts                              | views    | Labels |
        +====================================+==========+========+
        | (anchor,)                          | dropout  | none   |
        +------------------------------------+----------+--------+
        | (anchor, positive[, positive_2])   | explicit | none   |
        +------------------------------------+----------+--------+

    Relations:
        - The instance term is NT-Xent (:func:`~augcse.losses.infonce.nt_xent`), as VaSCL's.
        - The clustering term is DEC's self-training KL; the centroids are a parameter trained with the encoder.
        - Neighbour positives (CLNN): ``views: explicit`` after the ``cards`` view writing ``positive`` as one of
          the anchor's top-k neighbours under the starting model, drawn afresh each epoch
          (``{name: cards, switch_case: false, k: 10, negative_column: positive}``); the neighbour is then
          contrasted with the anchor, which is clustered.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import SCCLLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            texts = ["The cat sleeps.", "A kitten naps.", "Stocks fell today.", "Markets dropped sharply."]
            loss = SCCLLoss.from_texts(model, texts, clusters=2, seed=0)  # K-means of the starting embeddings
            q = loss.soft_assign(model.encode(texts, convert_to_tensor=True))  # (4, 2), rows sum to 1
            train = Dataset.from_dict({"anchor": texts})
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = SCCLParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        config = self.config
        self.clusters = config.clusters
        self.views = config.views
        self.contrastive_weight = float(config.contrastive_weight)
        self.eta = float(config.eta)
        self.alpha = float(config.alpha)
        self.kmeans_seed = config.kmeans_seed
        dim = model.get_embedding_dimension()
        start = np.zeros((self.clusters, dim), np.float32)
        if config.centroids is not None:
            start = read_centroids(config.centroids, self.clusters)
            if start.shape[1] != dim:
                raise ValueError(f"centroids file {config.centroids}: has {start.shape[1]} columns but the model's "
                                 f"embeddings have {dim}; compute the centroids with the model being trained")
        self.centroids = nn.Parameter(torch.from_numpy(start))
        self.centroids_source: str | None = config.centroids  # where the starting centroids came from
        self.register_load_state_dict_post_hook(_restored_centroids)

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        if params.get("views", "dropout") == "dropout":
            return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor", from_column=False)))
        return Contract((Role("anchor"), Role("positive"), Role("positive_2", required=False, fallback="anchor")),
                        default=("anchor", "positive"))

    @classmethod
    def from_texts(cls, model, texts: Sequence[str], clusters: int, seed: int = 0, batch_size: int = 64,
                   **params: Any) -> SCCLLoss:
        """The loss with its centroids started by K-means (``seed``) of ``model``'s embeddings of ``texts``."""
        loss = cls(model, clusters=clusters, kmeans_seed=seed, **params)
        loss.start_from(list(texts), batch_size)
        return loss

    def start_from(self, texts: list[str], batch_size: int = 64) -> None:
        """Set the centroids to K-means of the model's current embeddings of ``texts`` (seed ``kmeans_seed``)."""
        embeddings = self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        self.set_centroids(kmeans_centroids(embeddings, self.clusters, self.kmeans_seed),
                           f"K-means of {len(texts)} texts (seed {self.kmeans_seed})")

    def set_centroids(self, centroids: np.ndarray, source: str) -> None:
        """Replace the centroids (K, d) in place (the optimiser keeps the same parameter); ``source`` is recorded."""
        values = torch.as_tensor(np.asarray(centroids, dtype=np.float32))
        if tuple(values.shape) != tuple(self.centroids.shape):
            raise ValueError(f"centroids of shape {tuple(values.shape)} given; the loss needs {tuple(self.centroids.shape)}")
        with torch.no_grad():
            self.centroids.copy_(values)
        self.centroids_source = source

    def prepare(self, dataset) -> None:
        """K-means of the training anchors' starting embeddings when no centroids were given; with several
        processes rank 0's centroids are sent to every rank, so all start from one set."""
        if self.centroids_source is not None:
            return
        self.start_from(list(dataset.with_format(None)["anchor"]))
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
            shared = self.centroids.detach().to(device)
            dist.broadcast(shared, 0)
            self.set_centroids(shared.cpu().numpy(), self.centroids_source or "")

    def soft_assign(self, embeddings: Tensor) -> Tensor:
        """q (N, K) of pooled ``embeddings`` under the current centroids (rows sum to 1)."""
        return soft_assignment(embeddings.to(self.centroids), self.centroids, self.alpha)

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        """From the encoder's pooled embeddings by role: the head runs here, the clustering term reads the anchor."""
        if self.centroids_source is None:
            raise ValueError("SCCLLoss has no starting centroids: give centroids (a .npy of K-means centroids) or "
                             "build it with SCCLLoss.from_texts (a recipe's run computes them before training, "
                             "except for a composite's term)")
        pair = ("anchor", "positive") if self.views == "dropout" else ("positive", "positive_2")
        z1, z2 = self.apply_head([pooled[pair[0]], pooled[pair[1]]])
        contrastive = nt_xent(z1, z2, self.temperature, self.gather_across_devices)
        q = self.soft_assign(pooled["anchor"])
        cluster = cluster_divergence(q, target_distribution(q))
        return {"contrastive": self.contrastive_weight * contrastive, "cluster": self.eta * cluster}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "clusters": self.clusters, "centroids": self.centroids_source,
                "views": self.views, "contrastive_weight": self.contrastive_weight, "eta": self.eta,
                "alpha": self.alpha, "kmeans_seed": self.kmeans_seed}

    @property
    def citation(self) -> str:
        return ("@inproceedings{zhang2021sccl, title={Supporting Clustering with Contrastive Learning}, author={Zhang, "
                "Dejiao and Nan, Feng and Wei, Xiaokai and Li, Shang-Wen and Zhu, Henghui and McKeown, Kathleen and "
                "Nallapati, Ramesh and Arnold, Andrew O. and Xiang, Bing}, booktitle={NAACL}, year={2021}}")


def _restored_centroids(loss: SCCLLoss, keys) -> None:
    """A checkpoint's loss state that held the centroids is where they now come from (resume)."""
    if "centroids" not in keys.missing_keys and loss.centroids_source is None:
        loss.centroids_source = "restored from a checkpoint"
