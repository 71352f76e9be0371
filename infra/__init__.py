"""Vigil's CDK constructs: one per capability, composed by ``VigilStack``."""
