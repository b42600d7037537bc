"""``contextdelta replay`` (what the model saw, what it did, and what changed behind it, step by step) and the
text of ``contextdelta attribute`` (each failure's cause chain, from ``contextdelta.attribution``)."""

from contextdelta.replay._cause import (
    attribute_records,
    attributions_json,
    render_attribution,
    render_attribution_report,
)
from contextdelta.replay._render import (
    EpisodeNotFound,
    message_content,
    message_summary,
    render_episode,
    render_episodes,
    select_episodes,
    version_text,
)

__all__ = [
    "EpisodeNotFound",
    "attribute_records",
    "attributions_json",
    "message_content",
    "message_summary",
    "render_attribution",
    "render_attribution_report",
    "render_episode",
    "render_episodes",
    "select_episodes",
    "version_text",
]
