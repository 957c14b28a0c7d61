DROP TABLE ui_sessions;
