"""Words and the syntaxes people write: did-you-mean, figures' wording, durations, nesting depth."""
