"""LangGraph on coniti (extra ``coniti[langgraph]``): :class:`ConitiStore`, a
``langgraph.store.base.BaseStore`` whose items live in a coniti memory backend."""

from coniti.integrations.langgraph.store import ConitiStore

__all__ = ["ConitiStore"]
