-- book_lending_system_e068899a15: Book Lending System
CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL, genre TEXT NOT NULL CHECK (genre IN ('fiction', 'non-fiction')), publication_year INTEGER NOT NULL CHECK (publication_year > 0)) STRICT;

CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL UNIQUE, phone_number TEXT) STRICT;

CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id), member_id INTEGER NOT NULL REFERENCES members(member_id), loan_date TEXT NOT NULL, due_date TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'returned'))) STRICT;

CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), renewal_date TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'returned'))) STRICT;

CREATE TABLE overdue_fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), fine_amount REAL NOT NULL CHECK (fine_amount > 0), due_date TEXT NOT NULL) STRICT;
