"""``coniti cluster up`` / ``down``: a local NATS JetStream cluster for development (docs/cluster.md)."""

from __future__ import annotations

import click

from coniti.cli.context import common_options, settings

__all__ = ["cluster"]


@click.group()
def cluster() -> None:
    """A local NATS JetStream cluster on 127.0.0.1 for cluster mode (needs coniti[cluster])."""


@cluster.command()
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True,
              help="How many nats-server processes.")
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False),
              help="Where the servers keep their config, logs and data (and cluster.json).")
@common_options
def up(nodes: int, directory: str) -> None:
    """Start the servers (free loopback ports) and print their URLs, the value of --cluster. They
    keep running until 'coniti cluster down --dir DIR'; 'up' again restarts stopped ones."""
    from coniti.cluster.servers import up as start

    s = settings()
    running = start(directory, nodes)
    urls = ",".join(running.urls)
    if s.json:
        s.out.json({"dir": str(running.root), "urls": running.urls, "cluster": urls})
        return
    click.echo(urls)


@cluster.command()
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False),
              help="The directory given to 'coniti cluster up'.")
@common_options
def down(directory: str) -> None:
    """Stop the servers of the local cluster in DIR (its data stays)."""
    from coniti.cluster.servers import down as stop

    s = settings()
    n = stop(directory)
    if s.json:
        s.out.json({"dir": directory, "stopped": n})
        return
    click.echo(f"stopped {n} servers")
