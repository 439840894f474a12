"""FragmentationAware balance plugin (koord-descheduler): on nodes whose resources are unevenly requested
(cpu full, memory empty ...), evicts the one pod whose removal best evens the node out (reference §1.8)."""

from .args import FragmentationAwareArgs, parse_args
from .plugin import NAME, FragmentationAware, new

__all__ = ["NAME", "FragmentationAware", "FragmentationAwareArgs", "new", "parse_args"]
