"""The dashboard's page scripts (run by ``st.navigation`` in ``app.py``; a package only so a wheel ships them)."""

__all__: list[str] = []
