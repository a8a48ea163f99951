"""placeholder"""
def build_cache(*a, **k): raise NotImplementedError
def load_cache(*a, **k): raise NotImplementedError
