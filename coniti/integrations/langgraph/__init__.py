"""LangGraph on coniti (extra ``coniti[langgraph]``): :class:`ConitiStore`, a
``langgraph.store.base.BaseStore`` whose items live in a coniti memory backend, and
:class:`ConitiSaver`, a checkpointer whose thread state is durable, replayable and audited like any
coniti memory."""

from coniti.integrations.langgraph.checkpoint import ConitiSaver
from coniti.integrations.langgraph.store import ConitiStore

__all__ = ["ConitiSaver", "ConitiStore"]
