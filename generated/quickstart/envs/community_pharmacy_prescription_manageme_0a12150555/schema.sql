-- community_pharmacy_prescription_manageme_0a12150555: Community Pharmacy Prescription Management
CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK (age >= 0), gender TEXT NOT NULL CHECK (gender IN ('male', 'female')), medical_history TEXT, allergies TEXT, medications TEXT) STRICT;

CREATE TABLE medications ( medication_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, description TEXT, quantity REAL NOT NULL CHECK (quantity > 0), stock TEXT) STRICT;

CREATE TABLE orders (order_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id), quantity INTEGER NOT NULL CHECK (quantity >= 0), status TEXT NOT NULL CHECK (status IN ('open', 'closed')), order_date TEXT NOT NULL) STRICT;

CREATE TABLE allergies (allergy_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id)) STRICT;
