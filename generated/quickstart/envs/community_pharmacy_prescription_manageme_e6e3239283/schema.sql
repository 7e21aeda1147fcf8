-- community_pharmacy_prescription_manageme_e6e3239283: Community Pharmacy Prescription Management
CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK (age >= 0), allergies TEXT, medications TEXT) STRICT;

CREATE TABLE medications (medication_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, dosage REAL CHECK (dosage > 0), frequency TEXT NOT NULL CHECK (frequency IN ('daily', 'weekly', 'monthly')), expiration_date TEXT NOT NULL) STRICT;

CREATE TABLE prescriptions ( prescription_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id), quantity INTEGER CHECK (quantity >= 0), status TEXT NOT NULL CHECK (status IN ('open', 'closed')), start_date TEXT NOT NULL, end_date TEXT NOT NULL CHECK (end_date >= start_date)) STRICT;

CREATE TABLE orders (order_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id), medication_id INTEGER NOT NULL REFERENCES medications(medication_id), quantity INTEGER CHECK (quantity >= 0), status TEXT NOT NULL CHECK (status IN ('open', 'closed')), order_date TEXT NOT NULL) STRICT;
